-- A near-miss reply that says a figure moved from a value to itself (lesson
-- 14's old "The pool went from 2.53 to 2.53 GiB ...: more than 1%"): kvlab
-- check reads every reply a refused answer gets and must stop at it
-- (lsn_figures.c).
return {
  id = 14, flags = {},
  run = function(lab)
    assert(lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb", ["max-model-len"] = 8192 })
    local p = lab.plan()
    lab.ask{ prompt = "How many bytes of KV does one token take?", answer = p.kv_bytes_per_token, unit = "bytes",
             tolerance = 0, abs = 0.5, expect = "2 * num_layers * kv_heads_per_gpu * head_size * kv_dtype_bytes",
             near = { { value = p.kv_bytes_per_token / 2,
                        why = string.format("The pool went from %.2f to %.2f GiB.", p.kv_cache_gib, p.kv_cache_gib) } } }
  end,
}

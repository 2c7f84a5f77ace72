-- The same question and goal, done right: the answer agrees with its
-- formula, every wrong answer is read and refused, and the goal needs the
-- change.
return {
  id = 6, flags = { "max-model-len" },
  run = function(lab)
    assert(lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb", ["max-model-len"] = 8192 })
    local p = lab.plan()
    lab.ask{ prompt = "How many bytes of KV does one token take?", answer = p.kv_bytes_per_token, unit = "bytes",
             tolerance = 0, abs = 0.5, expect = "2 * num_layers * kv_heads_per_gpu * head_size * kv_dtype_bytes",
             near = { { value = p.kv_bytes_per_token / 2, why = "K and V both." } }, wrong = { "65536", "128 KB" } }
    lab.autorun(true)
    lab.traffic{ rate = 5, prompt_tokens = 200, output_tokens = 50, seed = 5 }
    lab.goal{ text = "Serve for 50 steps at max-model-len 4096.",
              check = function()
                local m = lab.metrics()
                return m ~= nil and m.step >= 50 and lab.plan().max_model_len == 4096
              end,
              script = { { "max-model-len", "4096" } }, steps = 100 }
  end,
}

-- The answer is typed in, and it is not what the engine computes (131,072
-- bytes): the check must say the answer disagrees with the engine.
return {
  id = 1,
  run = function(lab)
    assert(lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb", ["max-model-len"] = 8192 })
    lab.ask{ prompt = "How many bytes of KV does one token take?", answer = 99999, unit = "bytes",
             tolerance = 0, abs = 0.5, expect = "kv_bytes_per_token", script = "99999 bytes" }
  end,
}

-- "lots" is refused, but only because it cannot be read: refusing it proves
-- nothing about the question's check.
return {
  id = 4,
  run = function(lab)
    assert(lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb", ["max-model-len"] = 8192 })
    lab.ask{ prompt = "How many bytes of KV does one token take?", answer = lab.plan().kv_bytes_per_token,
             unit = "bytes", tolerance = 0, abs = 0.5, expect = "kv_bytes_per_token", wrong = { "65536", "lots" } }
  end,
}

-- The answer comes from the engine, but nothing ties it to an engine figure
-- the check can re-derive.
return {
  id = 2,
  run = function(lab)
    assert(lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb", ["max-model-len"] = 8192 })
    lab.ask{ prompt = "How many bytes of KV does one token take?", answer = lab.plan().kv_bytes_per_token,
             unit = "bytes", tolerance = 0, abs = 0.5 }
  end,
}

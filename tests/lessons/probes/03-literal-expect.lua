-- An expect that is a number, not a formula over engine figures, proves
-- nothing even when it is right.
return {
  id = 3,
  run = function(lab)
    assert(lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb", ["max-model-len"] = 8192 })
    lab.ask{ prompt = "How many bytes of KV does one token take?", answer = 131072, unit = "bytes",
             tolerance = 0, abs = 0.5, expect = "131072", given = { N = 2 } }
  end,
}

-- The goal asks for a server that has served 50 steps; the engine gets there
-- by itself with traffic running, flag change or not (max-model-len is
-- irrelevant to it).
return {
  id = 5, flags = { "max-model-len" },
  run = function(lab)
    assert(lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb", ["max-model-len"] = 8192 })
    lab.autorun(true)
    lab.traffic{ rate = 5, prompt_tokens = 200, output_tokens = 50, seed = 5 }
    lab.goal{ text = "Serve for 50 steps.",
              check = function() local m = lab.metrics(); return m ~= nil and m.step >= 50 end,
              script = { { "max-model-len", "4096" } }, steps = 100 }
  end,
}

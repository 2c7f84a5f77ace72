return { id = 5, run = function(lab)
  assert(lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb", ["max-model-len"] = 8192 })
  lab.traffic{ rate = 1e300 }
  lab.step(10)
end }

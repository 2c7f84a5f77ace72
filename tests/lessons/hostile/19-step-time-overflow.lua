-- lab.step_time at positions where start + n overflows int64.
return { id = 19, run = function(lab)
  lab.start({ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb" })
  lab.step_time({ { start = math.maxinteger, n = math.maxinteger } })
end }

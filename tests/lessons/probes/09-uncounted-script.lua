-- A goal whose fix is a change to the traffic: the server is not fixed, the
-- test is. kvlab check must refuse the script (lessons/host/lsn_lever.c):
-- only vllm serve flags and the card count, unless the goal's levers name
-- the flag (a goal about the traffic itself).
return {
  id = 9, flags = { "max-model-len", "request-rate" },
  run = function(lab)
    assert(lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb", ["max-model-len"] = 8192 })
    lab.autorun(true)
    lab.goal{ text = "Make requests wait in the queue.",
              check = function() local m = lab.metrics(); return m ~= nil and m.num_requests_waiting > 0 end,
              script = { { "request-rate", "400" } }, steps = 200 }
  end,
}

-- The same prediction done right: a readable prediction is taken, an
-- unreadable one refused, and the outcome agrees with the engine; a choice
-- prediction too.
return {
  id = 8,
  run = function(lab)
    assert(lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb", ["max-model-len"] = 8192,
                      ["max-num-seqs"] = 4 })
    for _ = 1, 10 do lab.submit{ prompt_tokens = 500, output_tokens = 100 } end
    local pred, got = lab.predict{ prompt = "How many of the 10 will wait?", unit = "requests", abs = 0.5,
                                   expect = "metrics.num_requests_waiting", script = "3",
                                   run = function() lab.step(5); return lab.metrics().num_requests_waiting end,
                                   why = function(p, g) return string.format("%d run: max-num-seqs.", 10 - g) end }
    assert(pred == 3 and got == 6, string.format("prediction %s, outcome %s", tostring(pred), tostring(got)))
    lab.predict{ prompt = "Will any be preempted?", choices = { "yes", "no" }, script = "b",
                 expect = "metrics.num_preemptions > 0 and 1 or 2",
                 run = function() lab.step(20); return lab.metrics().num_preemptions > 0 and 1 or 2 end }
  end,
}

-- A prediction whose run reports an outcome the engine disagrees with: the
-- run returns the running count where its expect reads the waiting one.
return {
  id = 7,
  run = function(lab)
    assert(lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb", ["max-model-len"] = 8192,
                      ["max-num-seqs"] = 4 })
    for _ = 1, 10 do lab.submit{ prompt_tokens = 500, output_tokens = 100 } end
    lab.predict{ prompt = "How many of the 10 will wait?", unit = "requests", abs = 0.5,
                 expect = "metrics.num_requests_waiting",
                 run = function() lab.step(5); return lab.metrics().num_requests_running end }
  end,
}

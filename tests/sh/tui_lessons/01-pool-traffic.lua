-- Fixture for the app tests: a pool of a few hundred blocks under traffic
-- that shares a 512-token prefix, so blocks are shared (ref counts), cached
-- blocks are hit and evicted, and the full pool preempts requests.
return {
  id = 1,
  title = "Fixture: a small pool under shared-prefix traffic",
  flags = { "max-num-seqs", "gpu-memory-utilization", "block-size", "enable-prefix-caching", "max-model-len" },
  run = function(lab)
    lab.page("Pool under traffic")
    lab.show("pool")
    lab.show("flags")
    lab.show("metrics")
    lab.show("requests")
    local ok, err = lab.start({ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb",
                                ["num-gpu-blocks-override"] = 400, ["max-model-len"] = 4096 })
    if not ok then error("the fixture server should start: " .. tostring(err)) end
    lab.say("Requests share a 512-token prefix and fill a pool of %d blocks.", lab.plan().num_blocks)
    lab.traffic({ rate = 6, prompt_tokens = { min = 200, max = 900 }, output_tokens = { min = 100, max = 400 },
                  prefix_id = "repo", prefix_tokens = 512, seed = 7 })
    lab.autorun(true)
    lab.pause()
    lab.page("A question")
    lab.ask({ prompt = "How many tokens does one block hold?", answer = lab.plan().block_size, unit = "tokens",
              hints = { "The pool's title says it." }, script = tostring(lab.plan().block_size) })
    lab.say("Answered.")
  end,
}

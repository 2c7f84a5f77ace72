-- Fixture for the classroom test and benchmark: two engine runs of a small
-- pool under traffic, a flag change between them, a question, and a page
-- that keeps the engine running (autorun) while the class reads.
return {
  id = 1,
  title = "Fixture: a class follows the pool",
  flags = { "max-num-seqs", "gpu-memory-utilization" },
  run = function(lab)
    lab.page("Start")
    lab.show("pool")
    lab.show("flags")
    lab.show("metrics")
    local ok, err = lab.start({ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb",
                                ["num-gpu-blocks-override"] = 300, ["max-model-len"] = 4096 })
    if not ok then error("the fixture server should start: " .. tostring(err)) end
    lab.traffic({ rate = 8, prompt_tokens = { min = 200, max = 900 }, output_tokens = { min = 50, max = 300 },
                  prefix_id = "repo", prefix_tokens = 256 })
    lab.speed(40)
    lab.say("A pool of %d blocks. Press n to run the engine.", lab.plan().num_blocks)
    lab.pause()
    lab.page("First run")
    lab.step(160)
    local m = lab.metrics()
    lab.say("First run over.\n\n  run1 step=%d done=%d preempted=%d", m.step, m.request_success, m.num_preemptions)
    lab.pause()
    lab.page("Second run")
    lab.step(120)
    m = lab.metrics()
    lab.say("Second run over.\n\n  run2 step=%d done=%d preempted=%d", m.step, m.request_success, m.num_preemptions)
    lab.pause()
    lab.page("A question")
    -- A run on this server, then a restart inside this step (no pause
    -- between): a smaller server, then a short run on it. The presenter
    -- presses n during the first run (finish now): followers must show the
    -- run after the restart, not the first run nor the last page's.
    lab.say("The big server runs on first.")
    lab.step(400)
    ok, err = lab.start({ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb",
                          ["num-gpu-blocks-override"] = 120, ["max-model-len"] = 4096, ["max-num-seqs"] = 3 })
    if not ok then error("the fixture's second server should start: " .. tostring(err)) end
    lab.step(200)
    m = lab.metrics()
    lab.say("Restarted run over.\n\n  run3 step=%d done=%d preempted=%d", m.step, m.request_success, m.num_preemptions)
    lab.ask({ prompt = "How many tokens does one block hold?", answer = lab.plan().block_size, unit = "tokens",
              expect = "block_size", hints = { "The flags view lists block-size." },
              script = tostring(lab.plan().block_size) })
    lab.page("Running on")
    lab.autorun(true)
    lab.say("The engine keeps running while you read.")
    lab.pause()
    lab.page("The end")
    lab.say("Done.")
  end,
}

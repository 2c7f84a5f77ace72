-- bench/room_bench.py: twelve pages over a pool of 2,000 blocks that keeps
-- running under shared-prefix traffic (autorun), then twelve still pages
-- where a key's effect is the only thing a follower draws.
return {
  id = 1,
  title = "Bench: a class follows an animated pool",
  flags = { "max-num-seqs" },
  run = function(lab)
    lab.show("pool")
    lab.show("metrics")
    lab.show("requests")
    local ok, err = lab.start({ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb",
                                ["num-gpu-blocks-override"] = 2000, ["max-model-len"] = 8192 })
    if not ok then error("the bench server should start: " .. tostring(err)) end
    lab.page("Intro")
    lab.say("The bench starts here.")
    lab.pause()
    lab.traffic({ rate = 30, prompt_tokens = { min = 200, max = 2000 }, output_tokens = { min = 50, max = 400 },
                  prefix_id = "repo", prefix_tokens = 512, seed = 3 })
    lab.speed(30)
    lab.autorun(true)
    for i = 1, 12 do
      lab.page(string.format("Running page %d", i))
      lab.say("Running page %d: the pool keeps moving.", i)
      lab.pause()
    end
    lab.traffic(nil)
    lab.autorun(false)
    for i = 1, 12 do
      lab.page(string.format("Still page %d", i))
      lab.say("Still page %d: nothing moves until the presenter presses n.", i)
      lab.pause()
    end
    lab.page("The end")
    lab.pause()
  end,
}

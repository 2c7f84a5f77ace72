-- Lesson 3: the same request with the KV cache on, then off. Without it,
-- every new token runs the whole sequence through the model again.
local fmt = require("lib.fmt")
local ask = require("lib.ask")
local course = require("lib.course")

-- A short question and a long answer: the answer's own tokens are what a
-- server without a cache keeps re-running, so the square shows.
local PROMPT, OUTPUT = 20, 200

-- Send one request and run it to the end, adding (output tokens so far,
-- tokens computed so far) to plot series `series` after every step.
-- Returns the tokens computed and the virtual seconds it took.
local function run_one(lab, series)
  local m0 = lab.metrics()
  local id = lab.submit({ prompt_tokens = PROMPT, output_tokens = OUTPUT })
  lab.plot_add(series, 0, 0)
  lab.on_step(function()
    local r, m = lab.request(id), lab.metrics()
    if r then lab.plot_add(series, r.num_output_tokens, m.computed_tokens - m0.computed_tokens) end
  end)
  lab.run_until(function()
    local r = lab.request(id)
    return r == nil or r.state == "finished"
  end, 20 * OUTPUT)
  lab.on_step(nil)
  local m = lab.metrics()
  return m.computed_tokens - m0.computed_tokens, m.time_s - m0.time_s
end

return {
  id = 3,
  title = "Recompute instead of remember",
  flags = { "kv-cache" },
  run = function(lab)
    local ok, err = course.start(lab, "A")
    if not ok then error("example A should start: " .. tostring(err)) end

    lab.page("With the cache")
    lab.show("flags")
    lab.show("plot")
    lab.plot({ title = "Tokens run through the model", xlabel = "output tokens",
      ylabel = "tokens computed so far", series = { "with the KV cache", "without" } })
    lab.speed(25)
    lab.say("What if the server kept no cache? Then the keys and values of earlier tokens would " ..
      "have to be computed again whenever a new token needs them. Let us measure both ways with " ..
      "the same request: a %d-token question and %d tokens to write.", PROMPT, OUTPUT)
    lab.say("The plot counts the work: x is the output tokens written so far, y the tokens run " ..
      "through the model so far (a running total).")
    lab.say("First with the cache, as vLLM always runs:")
    local with_tokens, with_s = run_one(lab, 1)
    lab.say("The prompt went through once (%d tokens), then each output token once, except the last: " ..
      "it is sampled and returned, never fed back in. %d + %d = %s tokens through the model, %.1f per " ..
      "output token, and %.3f seconds by the engine's clock. The total grows in a straight line.",
      PROMPT, PROMPT, with_tokens - PROMPT, fmt.int(with_tokens), with_tokens / OUTPUT, with_s)
    lab.pause()

    lab.page("Switch it off")
    lab.highlight("flags", "kv-cache")
    lab.say("The flags view has a switch vLLM does not have: kv-cache. Turn it off and the server " ..
      "keeps nothing between steps, so each new token redoes the prefill of the whole sequence so far.")
    lab.goal({
      text = "Turn the KV cache off: set kv-cache to off in the flags view.",
      check = function() return lab.flag("kv-cache") == "off" and lab.running() end,
      hints = { "Select kv-cache in the flags view and choose off." },
      script = { { "kv-cache", "off" } },
      levers = { "kv-cache" },   -- a what-if switch, and the point of this goal
    })
    lab.unhighlight("flags")

    lab.page("Without the cache")
    lab.say("The server restarted without a cache. The same request again:")
    local without_tokens, without_s = run_one(lab, 2)
    lab.say("This time: %s tokens through the model, %.1f per output token, %s the work of the " ..
      "run with the cache. Output token k re-runs all %d + k tokens before it, so the total grows with " ..
      "the square of the length: %d x %d + (0 + 1 + ... + %d) = %d x %d + %d x %d / 2.",
      fmt.int(without_tokens), without_tokens / OUTPUT, fmt.x(without_tokens / with_tokens),
      PROMPT, PROMPT, OUTPUT, OUTPUT - 1, PROMPT, OUTPUT, OUTPUT - 1, OUTPUT)
    lab.pause()

    -- Why the clock barely moved: the engine's time model for one step of
    -- this server, a decode step against a full recompute of the sequence.
    local p = lab.plan()
    local last = PROMPT + OUTPUT - 1
    local redo = lab.step_time({ { start = 0, n = last } })
    local N = 8192
    local long_with = lab.step_time({ { start = N, n = 1 } })
    local long_without = lab.step_time({ { start = 0, n = N + 1 } })
    lab.page("Why the clock barely moved")
    lab.say("The engine's clock says %.3f seconds this time and %.3f before. The work is real; " ..
      "this toy hides it. Every step, however few tokens it runs, first reads all %s of weights " ..
      "from GPU memory. Even the last recompute here, %d tokens, takes %.1f ms of arithmetic " ..
      "against %.1f ms of reading, so the extra work fits in time the GPU spent waiting anyway.",
      without_s, with_s, fmt.gib(p.weights_gib), last, redo.compute_s * 1000, redo.memory_s * 1000)
    lab.say("The bill arrives with long sequences and busy GPUs. One more token for an %s-token " ..
      "conversation, by the engine's time model for one step: %.1f ms with the cache, %.1f ms " ..
      "without (%s).",
      fmt.int(N), long_with.total_s * 1000, long_without.total_s * 1000,
      fmt.x(long_without.total_s / long_with.total_s))
    lab.pause()

    lab.page("Count the work")
    lab.say("Both runs are on the plot: o with the cache, + without it. The total without the cache " ..
      "follows from the two lengths alone, a %d-token prompt and %d output tokens.", PROMPT, OUTPUT)
    ask.count(lab, {
      prompt = string.format("Without the cache, how many tokens in total went through the model " ..
        "to answer the %d-token prompt with %d tokens? (Exactly: the engine counted them; you can " ..
        "work it out.)", PROMPT, OUTPUT),
      answer = without_tokens,
      expect = "metrics.computed_tokens",
      unit = "tokens",
      exact = true,
      near = {
        { value = with_tokens, why = "That is the run with the cache: each token once." },
        { value = without_tokens + OUTPUT, why = "One token too many per output token: token k re-runs " ..
          "the prompt and the k tokens written before it, not itself." },
        { value = PROMPT * OUTPUT, why = "You counted the prompt again for every output token, but " ..
          "not the output tokens written so far: they are re-run too." },
      },
      hints = {
        string.format("Output token k runs the prompt (%d) plus the k tokens written before it.", PROMPT),
        string.format("Sum over k from 0 to %d of (%d + k).", OUTPUT - 1, PROMPT),
      },
      explain = "The cache turns that square into a straight line. Memory is the price: the rest of " ..
          "the course is about how much, and how to spend it well.",
    })
    lab.pause()
  end,
}

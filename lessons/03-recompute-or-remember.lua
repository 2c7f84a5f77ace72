-- Lesson 3: the same request with the KV cache on, then off. Without it,
-- every new token runs the whole sequence through the model again.
local fmt = require("lib.fmt")
local ask = require("lib.ask")

local MODEL = "meta-llama/Llama-3.1-8B-Instruct"
local PROMPT, OUTPUT = 200, 48

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
    local ok, err = lab.start({ model = MODEL, gpu = "h100-80gb", ["gpu-memory-utilization"] = 0.9 })
    if not ok then error("example A should start: " .. tostring(err)) end

    lab.page("With the cache")
    lab.show("flags")
    lab.show("metrics")
    lab.plot({ title = "Tokens run through the model", xlabel = "output tokens written",
      ylabel = "tokens computed (running total)", series = { "with the KV cache", "without" } })
    lab.speed(8)
    lab.say("What if the server kept no cache? Then the keys and values of earlier tokens would " ..
      "have to be computed again whenever a new token needs them. Let us measure both ways with " ..
      "the same request: a %d-token prompt and %d tokens to write.", PROMPT, OUTPUT)
    lab.say("First with the cache, as vLLM always runs:")
    local with_tokens, with_s = run_one(lab, 1)
    lab.say("The prompt went through once (%d tokens), then each output token once: %s tokens in " ..
      "all, and %s seconds of GPU time by the engine's clock. The total grows in a straight line.",
      PROMPT, fmt.int(with_tokens), string.format("%.3f", with_s))
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
    })
    lab.unhighlight("flags")

    lab.page("Without the cache")
    lab.say("The server restarted without a cache. The same request again:")
    local without_tokens, without_s = run_one(lab, 2)
    lab.say("This time: %s tokens through the model and %s seconds, %s the work of the run with " ..
      "the cache. Output token k re-runs all %d + k tokens before it, so the total grows with the " ..
      "square of the length: roughly %d x %d + %d x %d / 2.",
      fmt.int(without_tokens), string.format("%.3f", without_s), fmt.x(without_tokens / with_tokens),
      PROMPT, PROMPT, OUTPUT, OUTPUT, OUTPUT)
    lab.pause()

    lab.page("Count the work")
    ask.count(lab, {
      prompt = string.format("Without the cache, how many tokens in total went through the model " ..
        "to answer the %d-token prompt with %d tokens? (The engine counted them; you can work it out.)",
        PROMPT, OUTPUT),
      answer = without_tokens,
      unit = "tokens",
      tolerance = 0.02,
      near = {
        { value = with_tokens, why = "That is the run with the cache: each token once." },
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

-- Lesson 11: drill: how many fit?
-- A long tail of requests: size concurrency from the longest request you
-- accept, not from the average one.
local fmt = require("lib.fmt")
local expect = require("lib.expect")
local course = require("lib.course")

local LONGEST = 32768                  -- the service cuts prompts here
local SHORT = { min = 500, max = 2500 }   -- a question about a function or two
local LONG = { min = 20000, max = LONGEST - 512 } -- a whole module pasted in
local LONG_SHARE = 0.1
local RATE = 12
local SECONDS = 30

-- Near-misses for a question whose answer is a whole count: each mistaken
-- figure rounded down the way the answer is, dropping any that lands on it.
local function whole_nears(answer, list)
  local out = {}
  for _, n in ipairs(list) do
    local v = math.floor(n.value)
    if v ~= answer then out[#out + 1] = { value = v, why = n.why } end
  end
  return out
end

return {
  id = 11,
  title = "Drill: how many fit?",
  flags = {},
  run = function(lab)
    local ok, err = course.start(lab, "A")
    assert(ok, err)
    local p = lab.plan()
    local mean_prompt = (1 - LONG_SHARE) * (SHORT.min + SHORT.max) / 2 + LONG_SHARE * (LONG.min + LONG.max) / 2

    lab.page("A long tail")
    lab.say("The assistant's traffic is mostly short: %d in 10 requests ask about a function or two " ..
            "(%s to %s tokens). The rest paste a whole module, up to %s tokens, the longest the " ..
            "service accepts. The average prompt is about %s tokens.", math.floor((1 - LONG_SHARE) * 10 + 0.5),
            fmt.int(SHORT.min), fmt.int(SHORT.max), fmt.int(LONGEST), fmt.int(mean_prompt))
    lab.say("The pool holds %s tokens. Divided by the average that looks like room for %d requests " ..
            "at once. Watch what the long ones do to it: %d requests per second arrive.",
            fmt.int(p.kv_cache_tokens), math.floor(p.kv_cache_tokens / mean_prompt), RATE)
    lab.show("pool")
    lab.show("metrics")
    lab.speed(200)
    lab.autorun(true)

    -- Poisson arrivals, one draw per engine step from the virtual clock.
    local next_s = 0
    lab.traffic(function(_, now)
      local out = {}
      while next_s <= now do
        local long = lab.random() < LONG_SHARE
        local r = long and LONG or SHORT
        out[#out + 1] = { prompt_tokens = lab.random(r.min, r.max), output_tokens = lab.random(100, 300) }
        next_s = next_s - math.log(1 - lab.random()) / RATE
      end
      return out
    end)
    -- Every step, add up who holds the cache: long requests against short.
    local held = { long = 0, short = 0 }
    local peak_long, samples, full, first_full = 0, 0, 0, nil
    local peak_usage, peak_waiting = 0, 0
    lab.run_until(function()
      local now = { long = 0, short = 0 }
      local n_long = 0
      for _, r in ipairs(lab.requests()) do
        if r.state == "running" then
          local k = r.prompt_tokens > SHORT.max and "long" or "short"
          now[k] = now[k] + r.num_computed_tokens
          if k == "long" then n_long = n_long + 1 end
        end
      end
      held.long, held.short = held.long + now.long, held.short + now.short
      peak_long = math.max(peak_long, n_long)
      samples = samples + 1
      local mm = lab.metrics()
      peak_usage = math.max(peak_usage, mm.kv_cache_usage_perc)
      peak_waiting = math.max(peak_waiting, mm.num_requests_waiting)
      if mm.kv_cache_usage_perc >= 0.95 then
        full = full + 1
        first_full = first_full or mm.num_requests_running
      end
      return lab.metrics().time_s >= SECONDS
    end, 40000)
    local total = held.long + held.short
    local m = lab.metrics()
    -- Freeze the picture here, so the views keep showing what the text describes.
    lab.traffic(nil)
    lab.autorun(false)
    local run_long, run_short = 0, 0
    for _, r in ipairs(lab.requests()) do
      if r.state == "running" then
        if r.prompt_tokens > SHORT.max then run_long = run_long + 1 else run_short = run_short + 1 end
      end
    end
    local share = total > 0 and held.long / total or 0
    print(string.format("long share %.2f, peak long %d, full %d/%d steps, waiting %d, preemptions %d, steps %d",
                        share, peak_long, full, samples, m.num_requests_waiting, m.num_preemptions, m.step))
    expect.holds(lab, "a tenth of the requests hold most of the cache", share > 0.5)
    if first_full then
      expect.holds(lab, "the cache fills with fewer requests than the average promises",
                   first_full < p.kv_cache_tokens / mean_prompt)
    else
      -- A step budget under a long prompt (V0's 512-token chunked prefill
      -- for a context over 32K): prefill, not the pool, holds requests back.
      expect.holds(lab, "the cache never fills: requests wait on the step budget",
                   p.max_num_batched_tokens < LONG.min and peak_waiting > 0)
    end
    lab.page("What the long ones did")
    lab.say("Over %.0f seconds the long requests, a tenth of the traffic, held %s of the cached " ..
            "tokens on average. Up to %d of them ran at once; the cache was full for %s of the " ..
            "steps, %d requests were preempted to make room and %d are waiting now.", m.time_s,
            fmt.pct(share, 0), peak_long, fmt.pct(full / samples, 0), m.num_preemptions, m.num_requests_waiting)
    if first_full then
      lab.say("The first time the cache filled up, only %d requests were running, against the %d the " ..
              "average promised. The count moves with the mix of long and short requests in flight: now, " ..
              "with the traffic stopped, %d run (%d long, %d short).", first_full,
              math.floor(p.kv_cache_tokens / mean_prompt), run_long + run_short, run_long, run_short)
    else
      lab.say("The cache never filled: at most %s of it was in use. This server prefills at most %s " ..
              "tokens a step (max-num-batched-tokens), so a long prompt needs %d steps or more to get " ..
              "in, and up to %d requests waited for their turn at once: here the step budget, not the " ..
              "pool, held them back. Now, with the traffic stopped, %d run (%d long, %d short).",
              fmt.pct(peak_usage, 0), fmt.int(p.max_num_batched_tokens),
              math.ceil(LONG.min / p.max_num_batched_tokens), peak_waiting, run_long + run_short, run_long, run_short)
    end
    lab.highlight("metrics", "num_preemptions")
    lab.say("So the average says little about how many you can serve. The promise you can keep is " ..
            "the worst case: every request at the longest length you accept.")
    lab.pause()

    local fit = p.kv_cache_tokens / LONGEST
    lab.page("How many fit?")
    lab.say("The pool: %s tokens (the log's 'GPU KV cache size'). This server still runs with the " ..
            "model's own limit, max-model-len %s, so the log counts its concurrency for requests that long; " ..
            "the service accepts at most %s tokens.", fmt.int(p.kv_cache_tokens), fmt.int(p.max_model_len),
            fmt.int(LONGEST))
    lab.show("log", { upto = "allocate" })
    lab.highlight("log", "GPU KV cache size")
    expect.between(lab, "8B on one H100: 32K requests at once", fit, 12, 15)
    lab.ask{
      prompt = string.format("How many whole requests of %s tokens fit in this pool at the same time? " ..
                             "(Exactly: a count.)", fmt.int(LONGEST)),
      answer = math.floor(fit),
      expect = "floor(kv_cache_tokens / N)", given = { N = LONGEST },
      unit = "requests",
      tolerance = 0, abs = 0.5,
      near = whole_nears(math.floor(fit), {
        { value = p.kv_cache_tokens / mean_prompt,
          why = "That divides by the average prompt. It only holds while the long ones stay rare at any moment." },
        { value = p.kv_cache_tokens / p.max_model_len,
          why = string.format("That uses the model's own limit, %s tokens. The service stops at %s.",
                              fmt.int(p.max_model_len), fmt.int(LONGEST)) },
        { value = p.kv_cache_tokens / 32000,
          why = string.format("32K here is %s tokens, not 32,000.", fmt.int(LONGEST)) },
        { value = math.ceil(fit),
          why = string.format("%.2f rounded up. The last of %d requests would not fit whole: count whole " ..
                              "requests, rounding down.", fit, math.ceil(fit)) },
      }),
      hints = {
        "Pool tokens divided by tokens per request, with every request as long as the longest you accept.",
        string.format("%s / %s.", fmt.int(p.kv_cache_tokens), fmt.int(LONGEST)),
      },
      script = string.format("%d", math.floor(fit)),
      wrong = { string.format("%d", math.floor(fit) + 2) },
      explain = string.format("%s / %s = %.2f: %d whole requests of the longest kind at once.",
                              fmt.int(p.kv_cache_tokens), fmt.int(LONGEST), fit, math.floor(fit)),
    }
    lab.restart{ ["max-model-len"] = LONGEST }
    lab.highlight("log", "Maximum concurrency")
    lab.say("kvlab restarted the server with --max-model-len %d. vLLM makes the same division at " ..
            "start-up: the log's 'Maximum concurrency' line reads %s.", LONGEST,
            fmt.x(lab.plan().max_concurrency))
    lab.autorun(false)
    lab.pause()
  end,
}

-- Lesson 10: break it: whole files as context.
-- Requests carrying whole source files; requests in flight = arrival rate x
-- lifetime; past what the pool holds they queue while the GPU has spare work.
local fmt = require("lib.fmt")
local expect = require("lib.expect")
local course = require("lib.course")

local FILE = { min = 12000, max = 20000 }   -- prompt: a whole file plus the question
local REPLY = { min = 200, max = 400 }      -- a few hundred tokens of answer
local START_RATE = 1

local function rate(lab)
  return tonumber(lab.flag("request-rate")) or START_RATE
end

local function send(lab)
  lab.traffic{ rate = rate(lab), prompt_tokens = FILE, output_tokens = REPLY, seed = 10 }
end

-- The goal: a queue that keeps growing while the cache is full.
local function saturated(lab)
  local m = lab.metrics()
  return lab.running() and m.kv_cache_usage_perc >= 0.9 and m.num_requests_waiting >= 5
end

return {
  id = 10,
  title = "Break it: whole files as context",
  flags = { "request-rate" },
  run = function(lab)
    local ok, err = course.start(lab, "A", { ["max-model-len"] = 32768, ["request-rate"] = START_RATE })
    assert(ok, err)
    local p = lab.plan()
    local per_req = (FILE.min + FILE.max) / 2 + (REPLY.min + REPLY.max) / 2
    local fits = p.kv_cache_tokens / per_req

    lab.page("Files as prompts")
    lab.say("The coding assistant gets a new habit: every request pastes a whole source file, " ..
            "%s to %s tokens, and asks for %d to %d tokens back. The pool on this H100 holds %s " ..
            "tokens, so about %d such requests fit at once.", fmt.int(FILE.min), fmt.int(FILE.max),
            REPLY.min, REPLY.max, fmt.int(p.kv_cache_tokens), math.floor(fits))
    lab.say("How many are there at once? A request stays in flight from arrival to its last token, " ..
            "so on average:")
    lab.say("  requests in flight =\n    arrival rate x lifetime")
    lab.say("The traffic generator now sends %g request per second. Watch the metrics.", rate(lab))
    lab.show("metrics")
    lab.show("pool")
    lab.speed(200)
    lab.predict{
      prompt = string.format("Before it runs: at %g request per second, how many requests will be in flight "
        .. "on average, running or waiting?", rate(lab)),
      unit = "requests", tolerance = 0.25, script = "10 requests",
      expect = "metrics.mean_num_requests_running + metrics.mean_num_requests_waiting",
      run = function()
        lab.autorun(true)
        send(lab)
        lab.run_until(function() return lab.metrics().request_success >= 25 end, 40000)
        local mm = lab.metrics()
        return mm.mean_num_requests_running + mm.mean_num_requests_waiting
      end,
      why = "A request is in flight from its arrival to its last token, so the count is the arrival rate "
        .. "times the lifetime: a second's arrivals times a few seconds each.",
    }
    -- hold the engine while the learner reads: the next page's figures are the
    -- outcome's, not those of a run that went on behind the text
    lab.autorun(false)
    lab.pause()

    local m = lab.metrics()
    local in_flight = m.mean_num_requests_running + m.mean_num_requests_waiting
    local life = m.e2e_mean_s
    -- The generator is random (Poisson arrivals): use the rate it really sent.
    local sent = #lab.requests()
    local seen = sent / m.time_s
    print(string.format("sent %d in %.1f s (%.2f/s), lifetime %.2f s, in flight %.2f, %d steps", sent, m.time_s,
                        seen, life, in_flight, m.step))
    expect.near(lab, "in flight = rate x lifetime (light load)", in_flight, seen * life, 0.25)
    lab.page("Light traffic")
    lab.say("Measured over the first %.0f seconds: %d requests arrived (%.2f per second), each lived " ..
            "%.1f s, and %.1f were in flight on average. %.2f/s x %.1f s = %.1f: the formula holds. " ..
            "That is far below the %d the pool can hold.", m.time_s, sent, seen, life, in_flight, seen,
            life, seen * life, math.floor(fits))
    lab.highlight("metrics", "kv_cache_usage_perc", nil, "far from full")
    lab.pause()

    lab.page("Turn up the traffic")
    lab.say("At what rate does the pool stop keeping up? At %.1f s per request it would take about " ..
            "%.0f requests per second to keep %d in flight, but lifetimes stretch as the batch " ..
            "grows, so find out on the engine.", life, fits / life, math.floor(fits))
    lab.say("Raise request-rate in the flags view (press f, type a number, Enter) until requests " ..
            "queue up while the KV cache is full. Each change starts a fresh run at the new rate.")
    lab.on_flag(function(name)
      if name == "request-rate" then send(lab) end
    end)
    lab.autorun(true)   -- the traffic runs while the learner turns it up
    lab.goal{
      text = "Raise request-rate until the queue grows while the KV cache is full.",
      check = function() return saturated(lab) end,
      hints = {
        string.format("The pool holds about %d of these requests. How many arrive in one lifetime?",
                      math.floor(fits)),
        "Try 4 requests per second.",
      },
      script = { { "request-rate", "4" } },
      levers = { "request-rate" },   -- the traffic is what this goal explores
      steps = 4000,
    }

    -- What the GPU did while requests waited: scheduled tokens per step
    -- against the step's token budget (max_num_batched_tokens).
    local steps, tokens, waiting, usage = 0, 0, 0, 0
    for _ = 1, 40 do
      lab.step(1)
      local s = lab.metrics()
      steps = steps + 1
      tokens = tokens + s.last_step_tokens
      waiting = waiting + s.num_requests_waiting
      usage = usage + s.kv_cache_usage_perc
    end
    print(string.format("saturated after %d steps", lab.metrics().step))
    lab.autorun(false)   -- the sampling below runs its own steps
    local budget = p.max_num_batched_tokens
    local used = tokens / steps / budget
    m = lab.metrics()
    -- Hold the picture still: the views keep showing what the text describes.
    lab.traffic(nil)
    expect.holds(lab, "queue with a full cache leaves the step budget mostly unused",
                 usage / steps >= 0.9 and waiting / steps >= 5 and used < 0.5)
    lab.page("Waiting with work to spare")
    lab.say("At %g requests per second the cache is %s full, %d requests run and %d wait.%s",
            rate(lab), fmt.pct(m.kv_cache_usage_perc, 0), m.num_requests_running, m.num_requests_waiting,
            m.num_requests_running > math.floor(fits) and string.format(" That is more than the %d of page 1: " ..
              "a request in flight holds only the tokens it has so far, fewer than a finished one.",
              math.floor(fits)) or "")
    lab.say("Over the last %d steps each step computed %s tokens on average, %s of the %s a step may " ..
            "take (max-num-batched-tokens). The GPU could take on more work per step; the waiting " ..
            "requests cannot start because there is nowhere to put their K and V.",
            steps, fmt.int(tokens / steps), fmt.pct(used, 1), fmt.int(budget))
    lab.highlight("metrics", "num_requests_waiting", nil, "memory-bound queue")
    lab.say("A faster GPU helps only as far as it shortens each request's life: requests would leave " ..
            "sooner, but the cache still caps how many can be in flight at once. What raises that cap " ..
            "is room for more requests in the same memory: fewer tokens per request, fewer bytes per token, " ..
            "or more memory for the pool.")
    lab.pause()
  end,
}

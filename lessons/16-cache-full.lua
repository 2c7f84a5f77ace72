-- Lesson 16: the pool runs out, the scheduler preempts, and the victim is
-- recomputed; a bigger max-num-seqs makes it worse, sizing makes it go away.
local fmt = require("lib.fmt")
local W = require("lib.workload")
local course = require("lib.course")

-- Code reviews: a longish prompt and a long answer, all arriving together.
local REVIEW = { prompt = 1200, output = 400 }
-- How many reviews arrive: 24, or more where the release's pool is bigger
-- (set in run from the engine, with OVER).
local NREQ = 24

-- Example B at 8K, running at most four requests at once.
local BASE = course.example("B", { ["max-model-len"] = 8192, ["max-num-seqs"] = 4 })

local function send(lab)
  if lab.running() then W.submit(lab, NREQ, REVIEW) end
end

local function peak_tokens() return REVIEW.prompt + REVIEW.output end

-- The max-num-seqs that breaks the pool: the smallest multiple of 4 whose
-- reviews at full length need 10% more than the pool holds (16 on the
-- textbook's 23,184 tokens; more on a release whose pool is bigger).
local function overflow_seqs(pool)
  return 4 * math.ceil(pool * 1.1 / peak_tokens() / 4)
end

-- A utilization that makes the pool too small for `seqs` reviews at full
-- length though it admits all their prompts, with a max-model-len short enough to start (the lever the
-- goal does not count), from the engine.
local SHORT_LEN = 2048
local function shrinking_util(lab, seqs)
  for u = 89, 30, -1 do
    local q = lab.what_if{ ["gpu-memory-utilization"] = u / 100, ["max-model-len"] = SHORT_LEN }
    -- every prompt admitted, but not every answer: the running ones must grow into a full pool
    if q and q.starts and q.kv_cache_tokens > seqs * REVIEW.prompt + 64 and q.kv_cache_tokens < 0.95 * seqs * peak_tokens() then
      return string.format("%.2f", u / 100)
    end
  end
end

local function first_victim(lab)
  for _, ev in ipairs(lab.events(0)) do
    if ev.kind == "preempt" then return ev.request end
  end
end

return {
  id = 16,
  title = "When the cache is full",
  flags = { "max-num-seqs", "kv-cache-dtype", "quantization", "gpu-memory-utilization", "max-model-len" },
  run = function(lab)
    lab.speed(200)
    lab.page("A queue, and an idea")
    local ok, err = lab.start(BASE)
    course.note(lab, "B")
    if not ok then error("the lesson's server did not start: " .. tostring(err)) end
    local base_plan = lab.plan()
    local pool = base_plan.kv_cache_tokens
    local over = overflow_seqs(pool)
    NREQ = math.max(24, over + 8)
    lab.show("pool"); lab.show("metrics"); lab.show("requests"); lab.show("flags")
    lab.on_flag(function() send(lab) end)
    send(lab)
    lab.say("Example B again: Llama 3.1 8B on the RTX 4090, a pool of %s tokens. %d code "
      .. "reviews arrive together, each a %s-token prompt that grows to %s tokens as the "
      .. "answer is written. max-num-seqs is %s: at most that many requests run at once.",
      fmt.int(pool), NREQ, fmt.int(REVIEW.prompt), fmt.int(peak_tokens()), lab.flag("max-num-seqs"))
    lab.predict{
      prompt = string.format("Before the engine runs: how many of the %d reviews will wait?", NREQ),
      unit = "requests", abs = 0.5, script = "12 requests",
      expect = "metrics.num_requests_waiting",
      run = function()
        lab.step(100)
        return lab.metrics().num_requests_waiting
      end,
      why = "The pool is not what holds them back here: max-num-seqs caps how many run at once.",
    }
    local m = lab.metrics()
    lab.highlight("metrics", "num_requests_waiting")
    lab.say("%d run and %d wait, while the cache is only %s full.",
      m.num_requests_running, m.num_requests_waiting, fmt.pct(m.kv_cache_usage_perc))
    lab.say("Someone looks at the queue and decides the server should run more requests at once.")
    lab.ask{
      prompt = string.format("If %d reviews run together, how many tokens short is the %s-token "
        .. "pool when they have all grown to full length?", over, fmt.int(pool)),
      answer = over * peak_tokens() - pool, unit = "tokens", tolerance = 0.02,
      expect = "N * (P + O) - kv_cache_tokens", given = { N = over, P = REVIEW.prompt, O = REVIEW.output },
      near = { { value = over * peak_tokens(), why = string.format("That is what the %d need in all. How much of " ..
                 "it is missing from the pool?", over) },
               { value = over * REVIEW.prompt, why = "The answers need cache too: count prompt plus output, then subtract the pool." } },
      hints = { string.format("%d x %s tokens, minus the pool.", over, fmt.int(peak_tokens())) },
    }
    lab.pause()

    lab.page("Make it preempt")
    lab.say("Go ahead and break it: change a flag so that the scheduler has to preempt. "
      .. "Each change restarts the server and sends the %d reviews again.", NREQ)
    lab.highlight("flags", "max-num-seqs")
    lab.autorun(true)   -- the server keeps serving while the learner edits flags
    -- A smaller pool also preempts, but it is not the point: too many running
    -- for the pool the server has. Said every time it happens.
    local util0 = tonumber(BASE["gpu-memory-utilization"])
    local function shrunk() return lab.plan().gpu_memory_utilization < util0 - 1e-9 end
    lab.on_flag(function()
      send(lab)
      local q = lab.plan()
      if q and q.starts and shrunk() then
        lab.say("Not counted: a utilization below %.2f shrinks the pool (%s tokens now). Preempting " ..
                "because the cache shrank is not the point here; let more requests run in the same pool.",
                util0, fmt.int(q.kv_cache_tokens))
      end
    end)
    local small = shrinking_util(lab, tonumber(lab.plan().max_num_seqs))
    lab.goal{
      text = "Make the scheduler preempt a running request (the reviews are sent again after each change).",
      check = function()
        return lab.running() and lab.metrics().num_preemptions > 0 and not shrunk()
      end,
      hints = { "Let more requests run at once than the pool can carry to the end.",
                string.format("Raise max-num-seqs to %d.", over) },
      script = { { "max-num-seqs", tostring(over) } },
      wrong = small and { { { "max-model-len", tostring(SHORT_LEN) }, { "gpu-memory-utilization", small },
                            says = "Not counted: a utilization below" } } or nil,
      steps = 600,
    }
    lab.on_flag(function() send(lab) end)
    lab.autorun(false)
    local seqs = tonumber(lab.plan().max_num_seqs)
    local pool_now = lab.plan().kv_cache_tokens
    if pool_now < pool then
      -- vLLM 0.2x on: CUDA graphs are captured for batch sizes up to max-num-seqs
      -- and the sampler is profiled with that many requests, both before the pool is sized
      local why = course.seqs_cost(base_plan, lab.plan())
      lab.say("max-num-seqs %d also cost the pool %s tokens at start-up (%s left)%s.", seqs,
              fmt.int(pool - pool_now), fmt.int(pool_now),
              why and (": in " .. course.release_name(lab) .. " " .. why .. ", before the cache is sized") or "")
    end
    -- Replay the same run slowly with the pool in front, so the learner sees the
    -- first preemption happen rather than read about it afterwards.
    ok = lab.restart{}
    if not ok then error("the server did not restart") end
    lab.unhighlight()
    lab.focus("pool")
    lab.highlight("metrics", "num_preemptions")
    lab.say("Watch it happen: the server restarts with your flags, the reviews arrive "
      .. "again, and the pool fills block by block until one is missing.")
    lab.speed(40)
    send(lab)
    local seen = lab.run_until(function() return lab.metrics().num_preemptions > 0 end, 5000)
    lab.speed(200)
    local victim = seen and first_victim(lab)
    if victim then lab.highlight("requests", "request", { victim }, "preempted") end
    lab.say("Every running request was admitted while its prompt fitted. Then each "
      .. "answer token needed another slot, and every %d tokens a new block. When a "
      .. "running request asked for a block and none was free, the scheduler took the "
      .. "most recently admitted request%s, freed all its blocks, and put it back at "
      .. "the head of the queue with nothing computed.", lab.plan().block_size,
      victim and string.format(" (request %d)", victim) or "")
    if victim then
      lab.say("Missed it? Press { to go back to the step just before request %d was preempted: "
        .. "the pool and the requests show its blocks as they were. ] plays the step, [ goes "
        .. "back again, End returns to now.", victim)
    end
    lab.pause()
    W.drain(lab)
    m = lab.metrics()
    lab.say("The reviews are done. Preemptions: %d. Tokens computed a second time: %s. "
      .. "A preempted request pays for its prefill twice (vLLM's prefix cache can rescue "
      .. "some of the freed blocks, but under pressure they are usually reused first).",
      m.num_preemptions, fmt.int(m.recomputed_tokens or 0))
    local at_seqs = m.num_preemptions
    lab.pause()

    lab.page("More sequences, more preemptions")
    -- Compare the learner's max-num-seqs with another value: all the reviews at
    -- once when theirs lets fewer run, else a smaller cap. Every figure is the
    -- engine's; if the comparison does not show the effect the text says so.
    -- Each run is labelled on the page while it plays.
    local function preemptions_at(n)
      local rok = lab.restart{ ["max-num-seqs"] = n }
      if not rok then error("the server did not restart") end
      lab.say("Now running: the same %d reviews at max-num-seqs %d.", NREQ, n)
      send(lab)
      W.drain(lab)
      local mm = lab.metrics()
      lab.say("  max-num-seqs %d:\n    %d preemptions, %s tokens\n    computed twice", n, mm.num_preemptions,
        fmt.int(mm.recomputed_tokens or 0))
      return mm.num_preemptions
    end
    lab.say("  max-num-seqs %d:\n    %d preemptions (your run, on\n    the page before)", seqs, at_seqs)
    local lo, at_lo, hi, at_hi
    if seqs < NREQ then
      lo, at_lo, hi = seqs, at_seqs, NREQ
      at_hi = preemptions_at(hi)
    else
      hi, at_hi = seqs, at_seqs
      for _, n in ipairs{ NREQ // 2, NREQ // 3, NREQ // 4 } do
        lo, at_lo = n, preemptions_at(n)
        if at_lo < at_hi then break end
      end
    end
    if at_hi > at_lo then
      lab.say("The same reviews with max-num-seqs %d: %d preemptions, against %d at %d. "
        .. "More running requests means more to grow, no more pool to grow in, and more "
        .. "work thrown away. A bigger max-num-seqs is not a fix for a full cache.",
        hi, at_hi, at_lo, lo)
    else
      lab.say("The same reviews with max-num-seqs %d: %d preemptions, and %d at %d. With "
        .. "your other flags the pool is so tight that the cap hardly matters; either way, "
        .. "a bigger max-num-seqs is not a fix for a full cache.", hi, at_hi, at_lo, lo)
    end
    ok = lab.restart{ ["max-num-seqs"] = seqs }
    if not ok then error("the server did not restart") end
    lab.say("Now running: the %d reviews once more at your max-num-seqs %d, where the next page " ..
      "starts from.", NREQ, seqs)
    send(lab)
    W.drain(lab)
    lab.pause()

    lab.page("Size it")
    lab.say("Steady preemptions mean the pool is too small for the traffic. Remove them "
      .. "while keeping max-num-seqs at %d or more: give the cache more tokens "
      .. "rather than the scheduler fewer requests.", seqs)
    lab.unhighlight()
    -- the lever the course warns against gets its reason on the page
    lab.on_flag(function(name, value)
      send(lab)
      local q = lab.plan()
      lab.page("Size it")
      if q and q.starts then
        lab.say("--%s %s: a pool of %s tokens, room for %d reviews at full length; the reviews are " ..
                "sent again.", name, value == "" and "(default)" or value, fmt.int(q.kv_cache_tokens),
                q.kv_cache_tokens // peak_tokens())
      elseif q then
        -- vLLM's own words for why are in the box under the text (and the
        -- log): not kvlab's error kind ("max_model_len")
        lab.say("--%s %s: the server does not start; vLLM's error is under this text.", name,
                value == "" and "(default)" or value)
      end
      if (tonumber(lab.flag("gpu-memory-utilization")) or util0) > util0 + 1e-9 then
        lab.say("Utilization above %.2f does not count here: it is the last resort (lessons 7 and 8). " ..
                "The pool grows only by eating the headroom a busy server needs. Put it back to %.2f and " ..
                "make each token smaller or the weights lighter.", util0, util0)
      end
    end)
    lab.autorun(true)
    lab.goal{
      text = string.format("Finish the reviews with no preemption, max-num-seqs still %d or more, " ..
                           "utilization %.2f.", seqs, util0),
      check = function()
        local mm = lab.metrics()
        return lab.running() and tonumber(lab.plan().max_num_seqs) >= seqs and mm.num_preemptions == 0
          and W.live(lab) == 0 and mm.generation_tokens > 0
          and lab.plan().gpu_memory_utilization <= util0 + 1e-9
      end,
      hints = { "Which flag makes each token smaller, or leaves more of the card for the pool?",
                "Try kv-cache-dtype fp8, or fp8 weights (quantization fp8)." },
      script = { { "kv-cache-dtype", "fp8" } },
      wrong = { { { "gpu-memory-utilization", "0.95" }, says = "last resort" } },
      steps = 1500,
    }
    lab.autorun(false)
    local fits = lab.plan().kv_cache_tokens // peak_tokens()
    lab.say("No preemption: the pool now holds %s tokens, room for %d reviews at full "
      .. "length. Tune max-num-seqs for latency once the cache fits the traffic, never to "
      .. "make a full cache go faster.", fmt.int(lab.plan().kv_cache_tokens), fits)
    lab.pause()
  end,
}

-- Lesson 12: reserving a max-model-len slab per request, and what a 32K
-- limit does to everyone's concurrency.
local fmt = require("lib.fmt")
local W = require("lib.workload")
local course = require("lib.course")

-- Chat traffic: short prompts and answers, far below any context limit. The
-- seed makes lesson 13 send exactly these chats, so its figures match ours.
local CHAT = { prompt = { 400, 2400 }, output = { 100, 500 }, seed = 1213 }
local NREQ = 160

-- Example A with slabs.
local BASE = course.example("A", { ["max-model-len"] = 8192, contiguous = "on" })

-- Send the chat traffic and run until the server is full, then a few steps
-- more so every admitted prompt is cached (as lesson 13 does); return what it holds.
local function fill(lab)
  W.submit(lab, NREQ, CHAT)
  W.saturate(lab, W.no_free_slab)
  lab.step(8)
  return W.slots(lab)
end

local function slab_blocks(lab)
  local p = lab.plan()
  return math.ceil(p.max_model_len / p.block_size)
end

return {
  id = 12,
  title = "Break it: contiguous slabs at 32K",
  flags = { "max-model-len" },
  run = function(lab)
    lab.page("One slab per request")
    local ok, err = lab.start(BASE)
    course.note(lab, "A")
    if not ok then error("the lesson's server did not start: " .. tostring(err)) end
    local p = lab.plan()
    lab.show("memory"); lab.show("pool"); lab.show("metrics"); lab.show("requests")
    lab.say("Before paging, a serving engine kept each request's keys and values in one "
      .. "unbroken stretch of memory. Since it cannot know how long a conversation will "
      .. "grow, it sets aside room for the longest one it accepts: max-model-len tokens.")
    lab.say("This server is example A with that old scheme switched on (kvlab's "
      .. "contiguous mode): Llama 3.1 8B on one H100, a pool of %s tokens, and "
      .. "max-model-len %s. Each request that is admitted takes a slab of %s blocks "
      .. "of %d tokens, whether it needs them or not.",
      fmt.int(p.kv_cache_tokens), fmt.int(p.max_model_len), fmt.int(slab_blocks(lab)), p.block_size)
    lab.pause()

    local cap = math.floor((p.num_blocks - 1) / slab_blocks(lab))
    lab.ask{
      prompt = "How many requests can hold a slab at the same time?",
      answer = cap, tolerance = 0, abs = 0.5, unit = "requests",
      expect = "floor((num_blocks - 1) / ceil(max_model_len / block_size))",
      near = {
        { value = cap + 1, why = "Only whole slabs can be handed out: round down." },
        { value = math.floor(p.kv_cache_tokens / W.mean_tokens(CHAT)),
          why = "That counts the tokens a chat really uses. A slab is set aside whole, used or not." },
      },
      hints = { "Divide the pool's blocks (less the null block) by the blocks in one slab.",
                string.format("%s usable blocks / %s blocks per slab, rounded down.",
                  fmt.int(p.num_blocks - 1), fmt.int(slab_blocks(lab))) },
      explain = "The pool is cut into slabs, and only whole slabs can be handed out.",
    }

    lab.page("Chat traffic in slabs")
    lab.say("Now %d chat requests arrive at once: prompts of a few hundred to a couple "
      .. "of thousand tokens, answers of a few hundred.", NREQ)
    local before = fill(lab)
    if before.running ~= cap then
      error(string.format("engine ran %d requests; slabs allow %d", before.running, cap))
    end
    lab.highlight("metrics", "num_requests_running", nil, "slabs")
    lab.highlight("metrics", "num_requests_waiting", nil, "no slab left")
    lab.say("%d requests run and %d wait, yet the running ones hold only %s tokens between "
      .. "them. Their slabs reserve %s.",
      before.running, lab.metrics().num_requests_waiting, fmt.int(before.used), fmt.int(before.reserved))
    lab.say("In the pool view a slab's blocks that hold no token yet are small circles "
      .. "(o in ASCII) in their request's colour: most of every slab, and most will never "
      .. "fill. Yet each one counts as used.")
    lab.ask{
      prompt = "What share of the reserved slots holds no token at all?",
      answer = before.empty_share * 100, unit = "%", tolerance = 0, abs = 1.5,
      expect = "(metrics.reserved_tokens - metrics.used_tokens) / metrics.reserved_tokens * 100",
      near = { { value = (1 - before.empty_share) * 100,
                 why = "That is the share that does hold tokens: the rest is empty." } },
      hints = { "Empty = reserved minus used; divide by reserved.",
                string.format("(%s - %s) / %s", fmt.int(before.reserved), fmt.int(before.used),
                  fmt.int(before.reserved)) },
      script = string.format("%.1f%%", before.empty_share * 100),
    }
    lab.pause()

    lab.page("A few users want 32K")
    lab.say("Some users want to paste whole repositories, so someone proposes raising "
      .. "max-model-len to 32K. Only a handful of requests will ever be that long.")
    lab.show("flags"); lab.highlight("flags", "max-model-len")
    -- vLLM reads a lowercase k as 1,000 and a capital K as 1,024
    -- (human_readable_int): 32k is 32,000, short of the 32K asked for
    lab.on_flag(function(name)
      local q = lab.plan()
      if name == "max-model-len" and q and q.starts and q.max_model_len < 32768 then
        -- a statement about the value typed, still true once the goal is met
        lab.say("max-model-len %s falls short of 32K (32,768).%s", fmt.int(q.max_model_len),
          q.max_model_len % 1000 == 0 and " vLLM reads a lowercase k as 1,000 (32k = 32,000) " ..
            "and a capital K as 1,024 (32K = 32,768)." or "")
      end
    end)
    -- releases before 0.8.4 read a plain integer there and refuse both
    local suffixes = lab.flag_in_release("max-model-len", "32K")
    lab.goal{
      text = "Raise max-model-len to 32768 (32K) in the flags view.",
      check = function() return lab.running() and lab.plan().max_model_len >= 32768 end,
      hints = { "Select max-model-len in the flags view and type 32768"
        .. (suffixes and " (or 32K: a capital K)." or " (this release takes digits only: no k or K).") },
      script = { { "max-model-len", "32768" } },
      wrong = suffixes and { { { "max-model-len", "32k" }, says = "vLLM reads a lowercase k as 1,000" } } or nil,
    }
    lab.on_flag(nil)
    lab.unhighlight()
    local after = fill(lab)
    local mml = lab.plan().max_model_len
    local cap32 = math.floor((lab.plan().num_blocks - 1) / slab_blocks(lab))
    if after.running ~= cap32 or after.running >= before.running then
      error(string.format("engine ran %d requests at 32K (slabs allow %d, before %d)",
        after.running, cap32, before.running))
    end
    lab.highlight("metrics", "num_requests_running", nil, "collapsed")
    lab.say("The same chats now get %s-token slabs. %d run where %d ran before, and %d wait.",
      fmt.int(lab.plan().max_model_len), after.running, before.running,
      lab.metrics().num_requests_waiting)
    lab.ask{
      prompt = "By what factor did the number of running requests fall (before / after)?",
      answer = before.running / after.running, unit = "x", tolerance = 0.05,
      -- slabs at the old limit over the requests running now
      expect = "floor((plan_with{ ['max-model-len'] = M }.num_blocks - 1) / ceil(M / block_size)) / "
        .. "metrics.num_requests_running", given = { M = BASE["max-model-len"] },
      near = { { value = after.running / before.running,
                 why = "Divide the old count by the new one: the result is above 1." } },
      hints = { string.format("Before: %d running. After: %d running.", before.running, after.running) },
      script = fmt.x(before.running / after.running),
    }
    lab.say("A limit meant for a few long requests cut concurrency for everybody, "
      .. "because the short chats pay for the longest conversation the server allows. "
      .. "At max-model-len %s the slabs were %s empty. The next lesson keeps the 32K limit "
      .. "and stops paying for it.", fmt.int(mml), fmt.pct(after.empty_share))
    if lab.running() and lab.plan().max_model_len ~= mml then
      lab.say("(You have since set max-model-len to %s; the figures above are from %s.)",
        fmt.int(lab.plan().max_model_len), fmt.int(mml))
    end
    lab.pause()
  end,
}

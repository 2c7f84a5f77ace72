-- Lesson 13: the same traffic with blocks handed out on demand.
local fmt = require("lib.fmt")
local W = require("lib.workload")
local expect = require("lib.expect")
local course = require("lib.course")

-- The same chats as lesson 12 (same seed), so "where lesson 12 ended" is exact.
local CHAT = { prompt = { 400, 2400 }, output = { 100, 500 }, seed = 1213 }
local NREQ = 160

-- Example A with 32K slabs, where lesson 12 ended.
local BASE = course.example("A", { ["max-model-len"] = 32768, contiguous = "on" })

-- Other traffic before the chats: enough requests, coming and going, to
-- hand out every block of the pool at least once. Their answers grow block
-- by block side by side, so each one's blocks interleave with the others';
-- freed, they leave the free queue in the order a server that has run a
-- while has it, and a new prompt's blocks come from all over the pool.
local CHURN = { prompt = { 20, 200 }, output = { 200, 1000 }, seed = 1300 }

local function churn(lab)
  local p = lab.plan()
  local per = (W.mean_tokens(CHURN) + p.block_size - 1) / p.block_size
  local n = math.ceil(1.2 * p.num_blocks / per)
  lab.speed(4000)
  W.submit(lab, n, CHURN)
  W.drain(lab, 100000)
  lab.speed(20)
  return n
end

-- The share of a block table's neighbours that sit next to each other in
-- the pool (1: one unbroken run, as in a fresh pool).
local function runs_share(blocks)
  local next_to = 0
  for i = 2, #blocks do
    if math.abs(blocks[i] - blocks[i - 1]) == 1 then next_to = next_to + 1 end
  end
  return #blocks > 1 and next_to / (#blocks - 1) or 1
end

local function fill(lab)
  W.submit(lab, NREQ, CHAT)
  if lab.flag("contiguous") == "on" then W.saturate(lab, W.no_free_slab) else W.admit_all(lab) end
  -- a few more steps so every admitted request is past its prefill
  lab.step(8)
  return W.slots(lab)
end

return {
  id = 13,
  title = "PagedAttention: blocks, not slabs",
  flags = { "contiguous", "max-model-len" },
  run = function(lab)
    lab.page("Where lesson 12 ended")
    local ok, err = lab.start(BASE)
    course.note(lab, "A")
    if not ok then error("the lesson's server did not start: " .. tostring(err)) end
    local bs = lab.plan().block_size
    lab.show("pool"); lab.show("metrics"); lab.show("requests")
    local slab = fill(lab)
    lab.say("Example A again, with 32K slabs: %d chat requests run, %d wait, and the "
      .. "running ones leave %s of their reserved slots empty, about %s empty slots each.",
      slab.running, lab.metrics().num_requests_waiting, fmt.pct(slab.empty_share),
      fmt.int(math.floor(slab.empty_per_request + 0.5)))
    lab.say("PagedAttention, the idea vLLM is built on, borrows paging from operating "
      .. "systems. The pool is cut into blocks of %d tokens. A request owns no memory "
      .. "up front: it gets one block when its first token needs a slot, another when "
      .. "token %d arrives, and so on. A block table per request lists its blocks in "
      .. "token order, so they need not sit next to each other.", bs, bs + 1)
    lab.ask{
      prompt = "With blocks handed out on demand, at most how many slots of a "
        .. "request's memory can be empty?",
      answer = bs - 1, unit = "tokens", tolerance = 0, abs = 0.4,
      expect = "block_size - 1",
      near = { { value = bs, why = "A block is only handed out when a token needs a slot in it, "
                   .. "so the last block always holds at least one token." } },
      hints = { "Only the last block in a block table can be partly filled.",
                "How many slots can the last block have empty if at least one is used?" },
    }

    lab.page("Switch to blocks")
    lab.say("Paging reserves nothing ahead of time, so the 32K limit can stay: it only "
      .. "caps how long one request may grow. The same %d chats are sent again after the switch.", NREQ)
    lab.show("flags"); lab.highlight("flags", "contiguous")
    lab.goal{
      text = "Turn contiguous off in the flags view, keeping max-model-len at 32K.",
      check = function()
        return lab.running() and lab.flag("contiguous") == "off" and lab.plan().max_model_len >= 32768
      end,
      hints = { "Select contiguous in the flags view and set it to off." },
      script = { { "contiguous", "off" } },
      levers = { "contiguous" },   -- a what-if switch, and the point of this goal
    }
    lab.unhighlight()
    lab.say("Before the chats, the server takes other traffic for a while: %s requests come and " ..
      "go, so every block of the pool has been handed out and freed at least once, as on a server " ..
      "that has been up for a day.", fmt.int(math.ceil(1.2 * lab.plan().num_blocks /
      ((W.mean_tokens(CHURN) + bs - 1) / bs))))
    churn(lab)
    local paged = fill(lab)
    if paged.empty_per_request >= bs then
      error(string.format("paged mode left %.1f empty slots per request (a block is %d)",
        paged.empty_per_request, bs))
    end
    if paged.running <= slab.running then
      error("paged mode ran no more requests than slabs did")
    end
    local r = W.longest_running(lab)
    expect.holds(lab, "the highlighted block table is scattered over the pool", runs_share(r.blocks) < 0.5)
    lab.highlight("requests", "request", { r.id }, "block table")
    lab.highlight("pool", "blocks", r.blocks, "request " .. r.id)
    lab.say("The same %d chats: %d run now instead of %d.", NREQ, paged.running, slab.running)
    local n = r.num_computed_tokens
    lab.say("Request %d is highlighted: it has K and V cached for %s tokens, and its block table lists "
      .. "the blocks lit up in the pool. They are scattered; the table is what ties them together.",
      r.id, fmt.int(n))
    if math.ceil(n / bs) ~= #r.blocks then
      error(string.format("request %d: %d tokens cached in %d blocks", r.id, n, #r.blocks))
    end
    local near_blocks = {}
    if math.floor(n / bs) ~= #r.blocks then
      near_blocks[1] = { value = math.floor(n / bs),
                         why = "A partly filled last block still counts: round up." }
    end
    lab.ask{
      prompt = string.format("Request %d has %s tokens cached. How many blocks are in its block table?",
        r.id, fmt.int(n)),
      answer = #r.blocks, unit = "blocks", tolerance = 0, abs = 0.4,
      expect = "ceil(N / block_size)", given = { N = n },
      near = near_blocks,
      hints = { string.format("Divide %s tokens by %d tokens per block and round up.",
                  fmt.int(n), bs) },
    }

    lab.page("Waste, both ways")
    lab.say("What each scheme reserved, and filled, under the same traffic:")
    lab.say(fmt.table{
      { "", "slabs", "blocks" },
      { "running", tostring(slab.running), tostring(paged.running) },
      { "reserved", fmt.int(slab.reserved), fmt.int(paged.reserved) },
      { "holding tokens", fmt.int(slab.used), fmt.int(paged.used) },
    })
    -- a measured figure: the rule of thumb (half a block) is a known mistake
    -- wherever the run measured something else
    local ABS = 0.15
    local thumb = (bs - 1) / 2
    local nears = { { value = slab.empty_per_request, why = "That is the slab figure. Use the blocks column." },
                    { value = paged.reserved - paged.used, why = "That is the empty slots of all of them: divide by the running requests." } }
    if math.abs(thumb - paged.empty_per_request) > 2 * ABS then
      nears[#nears + 1] = { value = thumb, why = string.format("That is the rule of thumb, half a block. The " ..
        "question asks what this run measured: the table's figures.") }
    end
    lab.ask{
      prompt = "In paged mode, how many empty slots does a running request carry on average? (This run's " ..
        "figure, from the table.)",
      answer = paged.empty_per_request, unit = "tokens", tolerance = 0, abs = ABS,
      expect = "(metrics.reserved_tokens - metrics.used_tokens) / metrics.num_requests_running",
      near = nears,
      hints = { "Empty slots are reserved minus holding tokens; share them among the running requests.",
                string.format("(%s - %s) / %d, in the blocks column.", fmt.int(paged.reserved),
                  fmt.int(paged.used), paged.running) },
      script = string.format("%.1f", paged.empty_per_request),
    }
    lab.say(fmt.table{
      { "", "slabs", "blocks" },
      { "empty/request", fmt.int(math.floor(slab.empty_per_request + 0.5)),
        string.format("%.1f", paged.empty_per_request) },
    })
    lab.say("Under one block per request, against thousands of slots per slab. With "
      .. "paging, the number of requests in flight is set by the tokens they really hold, "
      .. "and max-model-len is only a limit on one request, not a reservation. The pool "
      .. "itself is the same size in both modes: %s tokens.", fmt.int(lab.plan().kv_cache_tokens))
    lab.pause()
  end,
}

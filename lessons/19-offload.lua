-- Lesson 19: KV as data you move. Moving a prompt's KV over a link against
-- recomputing it inside a busy server's decode steps, over prompt length.
local fmt = require("lib.fmt")
local W = require("lib.workload")
local course = require("lib.course")

-- Example A taking prompts up to 32K.
local BASE = course.example("A", { ["max-model-len"] = 32768 })
-- The busy server: conversations that are all decoding.
local CHATS = { prompt = { 1500, 2500 }, output = { 3000, 4000 } }
local NCHAT = 32

-- The decode step the running requests take now: one new token each.
local function decode_chunks(lab)
  local chunks = {}
  for _, r in ipairs(lab.requests()) do
    if r.state == "running" then chunks[#chunks + 1] = { start = r.num_computed_tokens, n = 1 } end
  end
  return chunks
end

-- Extra time a prompt of `len` tokens adds when it is recomputed inside the
-- decode steps (chunked prefill: each step carries what the token budget allows).
local function recompute_s(lab, decode, base_s, len)
  local budget = lab.plan().max_num_batched_tokens - #decode
  local extra, start = 0, 0
  while start < len do
    local n = math.min(budget, len - start)
    local chunks = { table.unpack(decode) }
    chunks[#chunks + 1] = { start = start, n = n }
    extra = extra + (lab.step_time(chunks).total_s - base_s)
    start = start + n
  end
  return extra
end

-- One direction of a link listed in GB/s for both directions together.
local function move_s(lab, len, link_gbps)
  return len * lab.plan().kv_bytes_per_token / (link_gbps / 2 * 1e9)
end

-- Smallest prompt length at which moving beats recomputing (bisection; the
-- recompute cost grows faster than the move cost once compute is the limit).
local function break_even(lab, decode, base_s, link_gbps)
  local lo, hi = 1, lab.plan().max_model_len
  if recompute_s(lab, decode, base_s, hi) <= move_s(lab, hi, link_gbps) then return nil end
  while hi - lo > 1 do
    local mid = (lo + hi) // 2
    if recompute_s(lab, decode, base_s, mid) > move_s(lab, mid, link_gbps) then hi = mid else lo = mid end
  end
  return hi
end

-- The live part: a small GPU pool, a long document two readers share, and
-- other work in between that pushes the document out of the pool.
local DOC = 2048            -- the shared document's tokens
local POOL = 200            -- GPU blocks (num-gpu-blocks-override): the document takes 128
local FILLERS = 6           -- unrelated prompts between the two readers
local TIER, SMALL = "8", "0.125" -- GiB of CPU tier: enough, and too small for the document
local SPLIT_N, SPLIT_PROMPT, SPLIT_OUT = 40, 4096, 256 -- the split's burst

-- The document's first reader at once, the fillers from 1 s, the second
-- reader at 3 s (the engine's clock), each only once per server start.
local function send(lab)
  local sent = { first = false, fillers = 0, second = false }
  lab.traffic(function(_, now)
    local out = {}
    if not sent.first then
      sent.first = true
      out[#out + 1] = { prompt_tokens = 64, output_tokens = 16, prefix_id = "doc", prefix_tokens = DOC }
    end
    while sent.fillers < FILLERS and now >= 1.0 + 0.25 * sent.fillers do
      sent.fillers = sent.fillers + 1
      out[#out + 1] = { prompt_tokens = 1500, output_tokens = 16 }
    end
    if not sent.second and now >= 3.0 then
      sent.second = true
      out[#out + 1] = { prompt_tokens = 64, output_tokens = 16, prefix_id = "doc", prefix_tokens = DOC }
    end
    return out
  end)
end

-- Every request sent has finished.
local function done(lab)
  local m = lab.metrics()
  return m and m.request_success == FILLERS + 2
end

-- The CPU tier, live: the two readers without a tier, then the goal.
local function live_tier(lab)
  lab.on_flag(function()
    local m = lab.metrics()
    if not m then return end
    local cap = m.offload_capacity_blocks
    if cap > 0 and cap < DOC // lab.plan().block_size then
      lab.say("A tier of %s blocks is too small: the document alone is %d blocks, and vLLM skips "
        .. "a store that cannot fit whole.", fmt.int(cap), DOC // lab.plan().block_size)
    elseif cap > 0 then
      lab.say("The CPU tier holds %s blocks (%s of host memory): the row under the pool, least "
        .. "recently used at the left; its caption counts blocks stored from HBM (down arrow), loaded "
          .. "back (up) and evicted.",
        fmt.int(cap), fmt.bytes(cap * lab.plan().block_size * lab.plan().kv_bytes_per_token))
    end
    send(lab)
  end)
  send(lab)
  lab.autorun(true)
  local fine = lab.run_until(function() return done(lab) end, 3000)
  if not fine then error("the document's readers never finished") end
  local m0 = lab.metrics()
  if m0.prefix_cache_hits >= DOC then error("the pool kept the document: the fillers are too small") end
  lab.say("Without a CPU tier the whole run reused only %s tokens from the prefix cache: the "
    .. "fillers needed the blocks, so the pool evicted the document before its second reader came.",
    fmt.int(m0.prefix_cache_hits))
  -- hits by tier: the metrics view's CPU tier row (there once a tier is)
  lab.highlight("metrics", "external_prefix_cache_hits")
  lab.goal{
    text = string.format("Make the second reader find the whole document in a CPU tier "
      .. "(%s tokens of external prefix-cache hits).", fmt.int(DOC)),
    check = function()
      local m = lab.metrics()
      return lab.running() and done(lab) and m.external_prefix_cache_hits >= DOC
    end,
    hints = { "vLLM's flag for a CPU tier is kv-offloading-size, in GiB of host memory.",
              string.format("Set kv-offloading-size to %s.", TIER) },
    script = { { "kv-offloading-size", TIER } },
    wrong = { { { "kv-offloading-size", SMALL }, says = "is too small" } },
    steps = 1200,
  }
  lab.autorun(false)
  local m = lab.metrics()
  lab.say("The tier copied %s blocks out of HBM as they filled and brought %s back for the "
    .. "second reader: %s tokens loaded over PCIe instead of computed "
    .. "(vllm:external_prefix_cache_hits). The GPU pool still evicted the document; the host "
    .. "tier kept it.", fmt.int(m.offload_stored_blocks), fmt.int(m.offload_loaded_blocks),
    fmt.int(m.external_prefix_cache_hits))
  lab.ask{
    prompt = "How many blocks did the tier load back into the GPU pool?",
    answer = m.offload_loaded_blocks, unit = "blocks", tolerance = 0, abs = 0.5,
    expect = [[return metrics.external_prefix_cache_hits // block_size]],
    hints = { "Each loaded block holds block_size tokens of the external hit.",
              string.format("%s tokens / %d tokens per block.", fmt.int(m.external_prefix_cache_hits),
                lab.plan().block_size) },
  }
  lab.pause()
end

return {
  id = 19,
  title = "Beyond HBM: offload and move the KV",
  flags = { "kv-offloading-size" },
  run = function(lab)
    lab.speed(100)
    lab.page("KV as data")
    local ok, err = lab.start(BASE)
    course.note(lab, "A")
    if not ok then error("the lesson's server did not start: " .. tostring(err)) end
    local g, p = lab.gpu(), lab.plan()
    lab.show("metrics"); lab.show("plot")
    -- The busy server first, then the whole page at once: a paragraph added
    -- after the run would scroll the page to its end before it was read.
    W.submit(lab, NCHAT, CHATS)
    local fine = lab.run_until(function()
      local m = lab.metrics()
      if m.num_requests_running < NCHAT then return false end
      for _, r in ipairs(lab.requests()) do
        if r.state == "running" and r.num_computed_tokens < r.prompt_tokens then return false end
      end
      return true
    end, 200)
    if not fine then error("the conversations never all reached decode") end
    local decode = decode_chunks(lab)
    local base = lab.step_time(decode)
    lab.say("So far KV lived and died in one GPU's memory. Two techniques treat it as data "
      .. "that travels. Offloading copies blocks out to host memory over PCIe and brings them "
      .. "back when a conversation returns. Disaggregated serving prefills a prompt on one GPU "
      .. "and ships its KV to another GPU that decodes, over NVLink within a node or the network between nodes.")
    lab.say("Either way the alternative is to recompute the prompt. Which is cheaper depends "
      .. "on the link's bandwidth, the GPU's arithmetic, and how busy the GPU already is.")
    lab.say("This H100 is serving %d conversations, all decoding. One decode step takes %.1f ms "
      .. "and is %s-bound: it reads %.1f GiB of weights and KV for only %d new tokens, so the "
      .. "arithmetic units sit mostly idle (compute would take %.1f ms).",
      NCHAT, base.total_s * 1e3, base.memory_bound and "memory" or "compute",
      base.bytes / 2 ^ 30, #decode, base.compute_s * 1e3)
    lab.pause()

    lab.page("Move or recompute")
    local links = {}
    if g.pcie_gbps and g.pcie_gbps > 0 then links[#links + 1] = { name = "PCIe", gbps = g.pcie_gbps } end
    if g.nvlink_gbps and g.nvlink_gbps > 0 then links[#links + 1] = { name = "NVLink", gbps = g.nvlink_gbps } end
    if #links == 0 then error("the catalogue lists no link bandwidth for " .. g.id) end
    local series = { "recompute" }
    for _, l in ipairs(links) do series[#series + 1] = l.name end
    lab.plot{ title = "Time to get a prompt's KV back", xlabel = "prompt tokens", ylabel = "ms (log)",
              logy = true, series = series }
    local pcie = break_even(lab, decode, base.total_s, links[1].gbps)
    if not pcie then error("moving never beats recomputing here") end
    -- The lengths the learner reads: powers of two up to the longest request
    -- the server takes. The plot covers the same range (log time axis).
    local lens = {}
    local len = 128
    while len <= p.max_model_len do lens[#lens + 1] = len; len = len * 2 end
    local long = lens[#lens - 1]            -- the conversation of the last question
    local rows = { { "tokens", "recompute", links[1].name } }
    if links[2] then rows[1][4] = links[2].name end
    local first_faster
    for _, n in ipairs(lens) do
      local rec = recompute_s(lab, decode, base.total_s, n)
      local row = { fmt.int(n), string.format("%.2f", rec * 1e3) }
      for i, l in ipairs(links) do
        local mv = move_s(lab, n, l.gbps)
        row[i + 2] = string.format("%.2f", mv * 1e3)
        if i == 1 and mv < rec and not first_faster then first_faster = n end
      end
      rows[#rows + 1] = row
    end
    if not first_faster then error("moving never beats recomputing at the listed lengths") end
    -- the plot zooms on the crossing: from a few tokens to four times it
    local xmax = 64
    while xmax < 4 * pcie and xmax < p.max_model_len do xmax = xmax * 2 end
    for k = 1, 64 do
      local n = math.floor(xmax * k / 64)
      lab.plot_add(1, n, math.max(recompute_s(lab, decode, base.total_s, n) * 1e3, 1e-3))
      for i, l in ipairs(links) do lab.plot_add(i + 1, n, move_s(lab, n, l.gbps) * 1e3) end
    end
    lab.say("Moving costs the bytes over the link: %s per token, over %s GB/s each way for "
      .. "PCIe (the catalogue's %s GB/s counts both directions)%s.",
      fmt.bytes(p.kv_bytes_per_token), fmt.int(links[1].gbps / 2), fmt.int(links[1].gbps),
      #links > 1 and string.format(" and %s GB/s for NVLink", fmt.int(links[2].gbps / 2)) or "")
    lab.say("Recomputing costs arithmetic, %s TFLOPS of it in bf16, but it rides along in "
      .. "decode steps that wait on memory anyway: a short prompt fits in the idle compute "
      .. "for free. Past that, each extra token costs its full share of FLOPs, and attention "
      .. "over a longer prompt costs more per token still.", fmt.int(g.bf16_tflops))
    lab.say("The plot draws both from %d to %s tokens, around where they cross, with time on a "
      .. "log scale (PCIe and NVLink: moving the KV over that link).", xmax // 64, fmt.int(xmax))
    lab.pause()

    -- the table and its question on a page of their own, so both fit
    lab.page("Move or recompute: the table")
    lab.say("Milliseconds to get a prompt's KV back, by prompt length:")
    lab.say(fmt.table(rows))
    local before = nil
    for _, n in ipairs(lens) do if n < first_faster then before = n end end
    lab.ask{
      prompt = "Of the lengths in the table, which is the shortest where the PCIe reload beats recomputing?",
      answer = first_faster, unit = "tokens", tolerance = 0, abs = 0.5,
      -- the same comparison from fresh engine figures: the decode step the
      -- running requests take, a prompt recomputed in chunks beside it, the
      -- KV moved over one direction of PCIe
      expect = [[
        local decode = {}
        for _, r in ipairs(requests) do
          if r.state == "running" then decode[#decode + 1] = { start = r.num_computed_tokens, n = 1 } end
        end
        local base = step_time(decode).total_s
        local function recompute(len)
          local extra, start = 0, 0
          while start < len do
            local n = min(max_num_batched_tokens - #decode, len - start)
            local chunks = { table.unpack(decode) }
            chunks[#chunks + 1] = { start = start, n = n }
            extra = extra + step_time(chunks).total_s - base
            start = start + n
          end
          return extra
        end
        local len = 128
        while len <= max_model_len do
          if len * kv_bytes_per_token / (gpu.pcie_gbps / 2 * 1e9) < recompute(len) then return len end
          len = len * 2
        end]],
      near = before and { { value = before, why = "At that length recomputing is still the faster column." } } or nil,
      hints = { "Go down the table and compare the recompute and PCIe columns on each row.",
                "The first row where the PCIe figure is the smaller one." },
    }
    lab.say("Between %s and %s tokens, then: searching that gap with the engine's time model "
      .. "puts the crossing at %s tokens. Short prompts are cheaper to recompute in a busy "
      .. "server; long ones, such as a returning conversation or a pasted repository, are "
      .. "cheaper to move, and the gap widens with length.",
      fmt.int(before or 1), fmt.int(first_faster), fmt.int(pcie))
    local rec, mov = recompute_s(lab, decode, base.total_s, long), move_s(lab, long, links[1].gbps)
    lab.ask{
      prompt = string.format("A user returns to a %s-token conversation whose KV was offloaded to "
        .. "host memory. Which gets it back sooner?", fmt.int(long)),
      choices = { "Reload the KV over PCIe", "Recompute the prompt" },
      correct = mov < rec and 1 or 2,
      why = { [1] = "Read the table's row for that length.", [2] = "Read the table's row for that length." },
      hints = { string.format("The %s row: recompute against PCIe.", fmt.int(long)) },
    }
    lab.pause()

    -- ---- the CPU tier, live ------------------------------------------------
    lab.page("Offload, live")
    lab.hide("plot")
    local ok2, err2 = lab.restart{ ["num-gpu-blocks-override"] = POOL, ["max-model-len"] = 8192 }
    if not ok2 then error("the small pool did not start: " .. tostring(err2)) end
    local has_tier = lab.flag_in_release("kv-offloading-size")
    lab.show("pool"); lab.show("metrics"); lab.show("flags")
    lab.say("Now the engine moves blocks for real. The pool is cut to %d blocks (%s tokens) so "
      .. "that it fills: a %s-token document is read by one user, %d unrelated prompts follow, "
      .. "and a second user asks about the same document three seconds in.",
      POOL, fmt.int(POOL * lab.plan().block_size), fmt.int(DOC), FILLERS)
    if not has_tier then
      -- a release before the flag: vLLM would refuse it, so this page only says so
      lab.say("This course follows vLLM %s, which has no --kv-offloading-size: the flag that turns on "
        .. "vLLM's own CPU tier came in 0.11.1 (0.11.0 ships its OffloadingConnector, reachable only "
        .. "through --kv-transfer-config). Pick a newer release "
        .. "(kvlab --vllm-version 0.33) to watch blocks leave HBM and come back.",
        lab.plan().vllm_version or "?")
      lab.pause()
    else
      live_tier(lab)
    end

    -- ---- prefill and decode on different GPUs --------------------------------
    lab.page("Split prefill from decode")
    lab.traffic(nil)
    lab.hide("flags")
    local ok3 = lab.start(BASE)
    if not ok3 then error("the lesson's server did not start again") end
    local reqs = {}
    for i = 1, SPLIT_N do
      reqs[i] = { prompt_tokens = SPLIT_PROMPT, output_tokens = SPLIT_OUT, arrival_s = (i - 1) / 8 }
    end
    -- show: the pool view plays the run, the two pools side by side with the link
    local r = lab.split{ prefill = 1, decode = 1, link = "rdma", requests = reqs, show = true }
    if not r then error("the split did not run") end
    lab.show("pool")
    lab.say("The other way to move KV: a prefill GPU computes each prompt and sends its KV to a "
      .. "decode GPU, which only generates (vLLM's NixlConnector). %d prompts of %s tokens arrive "
      .. "8 per second, each asking for %d tokens, once on one H100 and once split 1:1 over a "
      .. "400 Gb/s network link. The pool view plays the split: the prefill GPU's pool on the "
      .. "left, the decode GPU's on the right, each transfer on the link between them:",
      SPLIT_N, fmt.int(SPLIT_PROMPT), SPLIT_OUT)
    lab.say(fmt.table{
      { "mean", "one GPU", "split" },
      { "first token", string.format("%.0f ms", r.one.ttft_mean_s * 1e3),
        string.format("%.0f ms", r.split.ttft_mean_s * 1e3) },
      { "between tokens", string.format("%.1f ms", r.one.itl_mean_s * 1e3),
        string.format("%.1f ms", r.split.itl_mean_s * 1e3) },
      { "KV moved", "-", fmt.bytes(r.split.kv_transfer_bytes) },
    })
    -- the two pools side by side with the link between them, as bars of their mean use
    local function bar(u)
      local n = math.floor(u * 16 + 0.5)
      return string.rep("█", n) .. string.rep("·", 16 - n)
    end
    lab.say("How full each GPU's KV pool was on average, and what crossed between them:\n"
      .. "  one GPU     %s %s\n  prefill GPU %s %s\n    │ %s over the link\n    ▼\n  decode GPU  %s %s",
      bar(r.one.mean_kv_usage), fmt.pct(r.one.mean_kv_usage, 0),
      bar(r.split.prefill_mean_kv_usage), fmt.pct(r.split.prefill_mean_kv_usage, 0),
      fmt.bytes(r.split.kv_transfer_bytes),
      bar(r.split.decode_mean_kv_usage), fmt.pct(r.split.decode_mean_kv_usage, 0))
    lab.say(r.split.ttft_mean_s > r.one.ttft_mean_s and
      "Split, the first token comes later: the prompt is prefilled, its KV crosses the link, and "
      .. "the decode GPU takes a step of its own before it samples." or
      "Split, even the first token comes sooner: prompts no longer queue behind other requests' "
      .. "decode steps.")
    lab.say("On one GPU every new prompt's prefill chunks ride in the decode steps of the others, "
      .. "so every running answer slows while a prompt is read. Split, the decode GPU never "
      .. "prefills: its steps stay short. The price is a second GPU and the transfer.")
    lab.ask{
      prompt = string.format("How many GiB of KV crossed the link for the %d prompts?", SPLIT_N),
      answer = r.split.kv_transfer_bytes / 2 ^ 30, unit = "GiB", tolerance = 0.02,
      expect = string.format([[return %d * %d * kv_bytes_per_token / 2^30]], SPLIT_N, SPLIT_PROMPT),
      hints = { "Every prompt's KV crosses once: tokens x bytes per token.",
                string.format("%d x %s tokens x %s per token.", SPLIT_N, fmt.int(SPLIT_PROMPT),
                  fmt.bytes(lab.plan().kv_bytes_per_token)) },
    }
    lab.pause()
  end,
}

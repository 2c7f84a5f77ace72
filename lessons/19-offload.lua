-- Lesson 19: KV as data you move. Moving a prompt's KV over a link against
-- recomputing it inside a busy server's decode steps, over prompt length.
local fmt = require("lib.fmt")
local W = require("lib.workload")

local BASE = {
  model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb",
  ["gpu-memory-utilization"] = 0.9, ["max-model-len"] = 32768,
}
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

return {
  id = 19,
  title = "Beyond HBM: offload and move the KV",
  flags = {},
  run = function(lab)
    lab.speed(100)
    lab.page("KV as data")
    local ok, err = lab.start(BASE)
    if not ok then error("the lesson's server did not start: " .. tostring(err)) end
    local g, p = lab.gpu(), lab.plan()
    lab.show("metrics"); lab.show("plot")
    lab.say("So far KV lived and died in one GPU's memory. Two techniques treat it as data "
      .. "that travels. Offloading copies blocks out to host memory over PCIe and brings them "
      .. "back when a conversation returns. Disaggregated serving prefills a prompt on one GPU "
      .. "and ships its KV to another GPU that decodes, over NVLink within a node.")
    lab.say("Either way the alternative is to recompute the prompt. Which is cheaper depends "
      .. "on the link's bandwidth, the GPU's arithmetic, and how busy the GPU already is.")
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
    for _, l in ipairs(links) do series[#series + 1] = l.name .. " move" end
    lab.plot{ title = "Time to get a prompt's KV back", xlabel = "prompt tokens", ylabel = "ms",
              logy = true, series = series }
    -- a linear axis out to a few times the crossing, so it can be read off
    local pcie = break_even(lab, decode, base.total_s, links[1].gbps)
    if not pcie then error("moving never beats recomputing here") end
    local xmax = math.min(p.max_model_len, 2 ^ math.ceil(math.log(3 * pcie, 2)))
    for k = 1, 32 do
      local len = math.floor(xmax * k / 32)
      lab.plot_add(1, len, math.max(recompute_s(lab, decode, base.total_s, len) * 1e3, 1e-3))
      for i, l in ipairs(links) do lab.plot_add(i + 1, len, move_s(lab, len, l.gbps) * 1e3) end
    end
    lab.say("Moving costs the bytes over the link: %s per token, over %s GB/s each way for "
      .. "PCIe (the catalogue's %s GB/s counts both directions)%s.",
      fmt.bytes(p.kv_bytes_per_token), fmt.int(links[1].gbps / 2), fmt.int(links[1].gbps),
      #links > 1 and string.format(" and %s GB/s for NVLink", fmt.int(links[2].gbps / 2)) or "")
    lab.say("Recomputing costs arithmetic, %s TFLOPS of it in bf16, but it rides along in "
      .. "decode steps that wait on memory anyway: a short prompt fits in the idle compute "
      .. "for free. Past that, each extra token costs its full share of FLOPs, and attention "
      .. "over a longer prompt costs more per token still.", fmt.int(g.bf16_tflops))
    local near = {}
    if #links > 1 then
      local nv = break_even(lab, decode, base.total_s, links[2].gbps)
      if nv and math.abs(nv - pcie) > 0.15 * pcie then
        near[1] = { value = nv, why = "That is where the NVLink line crosses. Follow the PCIe line." }
      end
    end
    -- two plotted lengths either side of the crossing, for the last hint
    local lo, hi = math.floor(xmax / 32), xmax
    for k = 1, 32 do
      local len = math.floor(xmax * k / 32)
      if len < pcie then lo = len elseif len < hi then hi = len end
    end
    local function at(len)
      return string.format("at %s tokens recompute takes %.2f ms and the PCIe move %.2f ms", fmt.int(len),
        recompute_s(lab, decode, base.total_s, len) * 1e3, move_s(lab, len, links[1].gbps) * 1e3)
    end
    lab.ask{
      prompt = "From what prompt length on is reloading the KV over PCIe faster than recomputing it?",
      answer = pcie, unit = "tokens", tolerance = 0.12,
      near = near,
      hints = { "Find where the PCIe line crosses the recompute curve.",
                "Below the crossing, recomputing is cheaper; above it, moving is.",
                string.format("On the plot, %s; %s.", at(lo), at(hi)) },
    }
    lab.say("About %s tokens. Short prompts are cheaper to recompute in a busy server; "
      .. "long ones, such as a returning conversation or a pasted repository, are cheaper "
      .. "to move, and the gap widens with length.", fmt.int(pcie))
    local long = math.min(p.max_model_len, 20000)
    local rec, mov = recompute_s(lab, decode, base.total_s, long), move_s(lab, long, links[1].gbps)
    lab.ask{
      prompt = string.format("A user returns to a %s-token conversation whose KV was offloaded to "
        .. "host memory. Which gets it back sooner?", fmt.int(long)),
      choices = { "Reload the KV over PCIe", "Recompute the prompt" },
      correct = mov < rec and 1 or 2,
      why = { [1] = "Compare the two curves at that length.", [2] = "Compare the two curves at that length." },
      hints = { string.format("Move: %.1f ms. Recompute: %.1f ms.", mov * 1e3, rec * 1e3) },
    }
    lab.pause()
  end,
}

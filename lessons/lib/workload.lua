-- Traffic shapes and engine snapshots shared by lessons 12 to 20.
-- Every figure here is read from the engine; the only numbers typed in are
-- the shapes of the traffic a lesson sends (how long its prompts are).
local M = {}

-- A small generator of its own for shapes with a `seed`: the same seed gives
-- the same lengths in every lesson (lab.random is seeded per lesson), so two
-- lessons that send "the same traffic" really do. 64-bit LCG (Knuth's MMIX).
local function seeded(seed)
  local x = seed
  return function(lo, hi)
    x = x * 6364136223846793005 + 1442695040888963407   -- wraps in Lua 5.4 integers
    return lo + (x >> 33) % (hi - lo + 1)
  end
end

-- Submit `n` requests. `shape` is a table {prompt = {lo, hi}, output = {lo, hi},
-- prefix_id =, prefix_tokens =, seed =}; lengths are drawn with lab.random,
-- which the host seeds per lesson, so a replay sends the same requests; with
-- `seed` they are drawn from a generator started afresh from it on every call.
-- Returns the ids.
function M.submit(lab, n, shape)
  local ids = {}
  local draw = shape.seed and seeded(shape.seed) or lab.random
  for i = 1, n do
    local p, o = shape.prompt, shape.output
    local req = {
      prompt_tokens = type(p) == "table" and draw(p[1], p[2]) or p,
      output_tokens = type(o) == "table" and draw(o[1], o[2]) or o,
      prefix_id = shape.prefix_id,
      prefix_tokens = shape.prefix_tokens,
    }
    ids[i] = lab.submit(req)
  end
  return ids
end

-- Mean prompt + output length of a shape, tokens.
function M.mean_tokens(shape)
  local function mean(v) return type(v) == "table" and (v[1] + v[2]) / 2 or v end
  return mean(shape.prompt) + mean(shape.output) + (shape.prefix_tokens or 0)
end

-- Number of live requests (running or waiting).
function M.live(lab)
  local m = lab.metrics()
  return m.num_requests_running + m.num_requests_waiting
end

-- Step until nothing is left to do. Errors when the engine never drains.
function M.drain(lab, max_steps)
  local ok = lab.run_until(function() return M.live(lab) == 0 end, max_steps or 20000)
  if not ok then error("the engine did not finish its requests", 2) end
end

-- Step until the scheduler can admit no more: requests wait while the ones
-- admitted run, and `full(lab)` (when given) holds, e.g. "no free slab left".
function M.saturate(lab, full, max_steps)
  local ok = lab.run_until(function()
    local m = lab.metrics()
    return m.num_requests_waiting > 0 and m.num_requests_running > 0 and (not full or full(lab))
  end, max_steps or 400)
  if not ok then error("the traffic never filled the server", 2) end
end

-- Step until every submitted request has been admitted (none waits).
function M.admit_all(lab, max_steps)
  local ok = lab.run_until(function() return lab.metrics().num_requests_waiting == 0 end, max_steps or 400)
  if not ok then error("some requests were never admitted", 2) end
end

-- Contiguous mode is full when the free blocks cannot make one more slab.
function M.no_free_slab(lab)
  local p = lab.plan()
  return lab.blocks().free < math.ceil(p.max_model_len / p.block_size)
end

-- Reserved and used KV slots of the running requests, summed, from the engine.
-- Contiguous mode reserves a max-model-len slab; paged mode whole blocks.
function M.slots(lab)
  local m = lab.metrics()
  local running = m.num_requests_running
  local reserved, used = m.reserved_tokens, m.used_tokens
  return {
    running = running,
    reserved = reserved,
    used = used,
    empty = reserved - used,
    empty_per_request = running > 0 and (reserved - used) / running or 0,
    empty_share = reserved > 0 and (reserved - used) / reserved or 0,
  }
end

-- The running request with the longest block table (for drawing one table).
function M.longest_running(lab)
  local best
  for _, r in ipairs(lab.requests()) do
    if r.state == "running" and (not best or #r.blocks > #best.blocks) then best = r end
  end
  return best
end

return M

-- lib.ask: the common question patterns, with the mistakes learners really
-- make listed as near-misses (each with its own explanation). The checker
-- itself already catches a right number in the wrong byte unit (GB vs GiB,
-- KiB vs MiB), so these add the mistakes of the formula.
local fmt = require("lib.fmt")

local ask = {}

local UNIT_BYTES = {
  bytes = 1, KiB = 1024, MiB = 1024 ^ 2, GiB = 1024 ^ 3, TiB = 1024 ^ 4,
  KB = 1e3, MB = 1e6, GB = 1e9, TB = 1e12,
}

-- Add {value, why} to near unless it is (almost) the answer or already there.
local function add_near(near, answer, value, why, tol)
  if value == nil or value ~= value then return end
  local t = (tol or 0.01) * 2
  if math.abs(value - answer) <= t * math.abs(answer) then return end
  for _, n in ipairs(near) do
    if math.abs(n.value - value) <= t * math.abs(value) then return end
  end
  near[#near + 1] = { value = value, why = why }
end

local function copy_common(q, spec)
  q.hints = spec.hints
  q.explain = spec.explain
  q.script = spec.script
  q.wrong = spec.wrong
  q.tolerance = spec.tolerance
  q.abs = spec.abs
  q.expect = spec.expect
  q.given = spec.given
  if spec.exact then
    -- a count: only the whole number itself (no relative slack at all)
    q.tolerance, q.abs = 0, 0.5
  end
  return q
end

-- Every wrapper takes spec.exact = true for a count that must be exact
-- (accepted only within 0.5 of the answer, so an off-by-one is refused).

-- A number of tokens. spec: prompt, answer (tokens), block_size (adds the
-- "answered in blocks" near-miss), near (more), hints, explain, tolerance.
function ask.tokens(lab, spec)
  local near = {}
  for _, n in ipairs(spec.near or {}) do near[#near + 1] = n end
  if spec.block_size and spec.block_size > 1 then
    add_near(near, spec.answer, spec.answer / spec.block_size,
      string.format("That is the number of blocks. Each block holds %d tokens, so multiply by %d.",
        spec.block_size, spec.block_size), spec.tolerance)
  end
  return lab.ask(copy_common({
    prompt = spec.prompt, answer = spec.answer, unit = "tokens", near = near,
  }, spec))
end

-- An amount of KV memory. spec: prompt, bytes (the right figure in bytes),
-- unit ("GiB", "KiB", ...: the unit the prompt asks in), and what the figure
-- was made of, to name the classic mistakes:
--   layers, kv_heads, heads (query heads), dtype_bytes, tokens (if it is
--   bytes for that many tokens).
function ask.bytes(lab, spec)
  local unit = spec.unit or "bytes"
  local scale = UNIT_BYTES[unit] or error("ask.bytes: unknown unit " .. tostring(unit), 2)
  local answer = spec.bytes / scale
  local near = {}
  for _, n in ipairs(spec.near or {}) do near[#near + 1] = n end
  local tol = spec.tolerance
  add_near(near, answer, answer / 2,
    "That counts only the keys, or only the values. The cache keeps both for every token: multiply by 2.", tol)
  if spec.heads and spec.kv_heads and spec.heads ~= spec.kv_heads then
    add_near(near, answer, answer * spec.heads / spec.kv_heads, string.format(
      "You used the %d attention (query) heads. Only KV heads are cached: here %d query heads share %d KV heads.",
      spec.heads, spec.heads, spec.kv_heads), tol)
  end
  if spec.layers and spec.layers > 1 then
    add_near(near, answer, answer / spec.layers, string.format(
      "That is one layer's worth. Each of the %d layers keeps its own keys and values.", spec.layers), tol)
  end
  if spec.dtype_bytes and spec.dtype_bytes ~= 2 then
    add_near(near, answer, answer * 2 / spec.dtype_bytes, string.format(
      "That assumes 2 bytes per value; this cache stores %d byte%s per value.",
      spec.dtype_bytes, spec.dtype_bytes == 1 and "" or "s"), tol)
  end
  if spec.tokens and spec.tokens > 1 then
    add_near(near, answer, answer / spec.tokens, string.format(
      "That is the cost of one token; the question is about %s tokens.", fmt.int(spec.tokens)), tol)
  end
  return lab.ask(copy_common({
    prompt = spec.prompt, answer = answer, unit = unit, near = near,
  }, spec))
end

-- Any other count (vectors, requests, blocks, a plain number): a thin
-- wrapper that keeps the call sites uniform. spec.unit defaults to "".
function ask.count(lab, spec)
  return lab.ask(copy_common({
    prompt = spec.prompt, answer = spec.answer, unit = spec.unit or "", near = spec.near,
  }, spec))
end

-- Multiple choice: spec.choices, spec.correct (1-based), spec.why[i].
function ask.choice(lab, spec)
  return lab.ask({
    prompt = spec.prompt, choices = spec.choices, correct = spec.correct, why = spec.why,
    hints = spec.hints, explain = spec.explain,
  })
end

return ask

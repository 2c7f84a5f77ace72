-- Drawings of attention heads for the narration (plain ASCII, so they read
-- the same with --ascii and without colour).
local M = {}

-- Two lines: query heads ("q") in their groups, and under each group the one
-- K/V pair ("KV") the whole group reads. heads must be a multiple of kv.
-- Wide shapes are drawn with one mark per `scale` query heads.
function M.groups(heads, kv, maxw)
  maxw = maxw or 56
  local per = heads // kv
  if per == 1 then
    local n = math.min(heads, 24)
    local more = heads > n and string.format(" ... (%d in all)", heads) or ""
    return "  query heads  " .. string.rep("q", n, " ") .. more .. "\n" ..
           "  cached       " .. string.rep("K", n, " ") .. more .. "\n" ..
           "  (every query head has its own K/V pair)"
  end
  local scale = 1
  while kv * (math.max(per // scale, 1) + 1) > maxw and scale < per do scale = scale * 2 end
  local w = math.max(per // scale, 2)
  local q, k = {}, {}
  for _ = 1, kv do
    local marks = string.rep("q", math.max(per // scale, 1))
    q[#q + 1] = marks .. string.rep(" ", w - #marks)
    k[#k + 1] = "KV" .. string.rep(" ", w - 2)
  end
  local sep = kv > 1 and " " or ""
  local lines = {
    "  query heads  " .. table.concat(q, sep),
    "  cached       " .. table.concat(k, sep),
  }
  if scale > 1 then
    lines[#lines + 1] = string.format("  (one q per %d query heads)", scale)
  end
  -- A model too wide even at one mark per group is summarised instead.
  if #lines[1] > maxw + 16 then
    lines = { string.format("  %d query heads in %d groups of %d; one K/V pair per group", heads, kv, per) }
  end
  return table.concat(lines, "\n")
end

-- Which KV heads each tensor-parallel rank holds, one line per rank, from
-- lab.ranks(). Long lists are folded ("ranks 2-15 ...") past `max` lines.
function M.ranks(ranks, max)
  max = max or 8
  local out = {}
  for i, r in ipairs(ranks) do
    if i > max then
      out[#out + 1] = string.format("  ... and %d more ranks", #ranks - max)
      break
    end
    local ids = {}
    for _, h in ipairs(r.kv_heads or {}) do ids[#ids + 1] = "KV" .. h end
    out[#out + 1] = string.format("  rank %-2d %s", r.rank, table.concat(ids, " "))
  end
  return table.concat(out, "\n")
end

return M

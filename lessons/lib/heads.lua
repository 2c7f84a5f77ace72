-- Drawings of attention heads for the narration (plain ASCII, so they read
-- the same with --ascii and without colour).
local M = {}

-- Two lines: query heads ("q") in their groups, and under each group the one
-- K/V pair ("KV") the whole group reads. heads must be a multiple of kv.
-- Drawn within about 36 columns (the text view on an 80-column terminal):
-- wide shapes get one mark per `scale` query heads, and say so.
function M.groups(heads, kv)
  local per = heads // kv
  local room = 32
  if per == 1 then
    local n = math.min(heads, 12)
    local more = heads > n and string.format(" .. x%d", heads) or ""
    return "  q   " .. string.rep("q", n, " ") .. more .. "\n" ..
           "  KV  " .. string.rep("K", n, " ") .. more .. "\n" ..
           "  (each query head has its own K/V)"
  end
  if kv > room // 2 then
    return string.format("  %d query heads in %d groups of %d,\n  one K/V pair per group", heads, kv, per)
  end
  local scale = 1
  while kv * (per // scale + 1) - 1 > room and scale < per and per % (scale * 2) == 0 do scale = scale * 2 end
  if kv * (per // scale + 1) - 1 > room then
    return string.format("  %d query heads in %d groups of %d,\n  one K/V pair per group", heads, kv, per)
  end
  local w = math.max(per // scale, 2)
  local q, k = {}, {}
  for _ = 1, kv do
    local marks = string.rep("q", math.max(per // scale, 1))
    q[#q + 1] = marks .. string.rep(" ", w - #marks)
    k[#k + 1] = "KV" .. string.rep(" ", w - 2)
  end
  local lines = {
    (("  q   " .. table.concat(q, " ")):gsub("%s+$", "")),
    (("  KV  " .. table.concat(k, " ")):gsub("%s+$", "")),
  }
  if scale > 1 then
    lines[#lines + 1] = string.format("  (one q = %d query heads)", scale)
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

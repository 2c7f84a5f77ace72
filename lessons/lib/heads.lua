-- Drawings of attention heads for the narration (plain ASCII, so they read
-- the same with --ascii and without colour).
local M = {}

-- Two lines: query heads in their groups, one "q" per query head, and under
-- each group the one K/V pair ("KV") the whole group reads; then a line
-- with the totals. heads must be a multiple of kv. Drawn within 36 columns
-- (the text view on an 80-column terminal): groups that do not fit are
-- left out after "...", and so is the end of a group wider than the line.
function M.groups(heads, kv)
  local per = heads // kv
  local w = math.max(per, 2)          -- a group is at least as wide as "KV"
  local room = 26                     -- 36 less the row label and " ..."
  local shown = math.min(kv, math.max(1, (room + 1) // (w + 1)))
  local q, k = {}, {}
  for _ = 1, shown do
    local marks = per > room and (string.rep("q", room - 3) .. "...") or string.rep("q", per)
    q[#q + 1] = marks .. string.rep(" ", math.max(0, w - #marks))
    k[#k + 1] = "KV" .. string.rep(" ", math.max(0, math.min(w, room) - 2))
  end
  local more = shown < kv and " ..." or ""
  return table.concat({
    more ~= "" and ("  q   " .. table.concat(q, " ") .. more) or (("  q   " .. table.concat(q, " ")):gsub("%s+$", "")),
    more ~= "" and ("  KV  " .. table.concat(k, " ") .. more) or (("  KV  " .. table.concat(k, " ")):gsub("%s+$", "")),
    string.format("  (%d query heads, %d KV pair%s)", heads, kv, kv == 1 and "" or "s"),
  }, "\n")
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

-- Course figures, asserted headless.
--
-- Under `kvlab check` (lab.headless) a lesson states the figure the course
-- promises next to the figure the engine produced, and the check fails when
-- they drift apart. In the app these calls do nothing: the learner only ever
-- sees the engine's own numbers.
local M = {}

local function num(what, v)
  if type(v) ~= "number" or v ~= v then
    error(string.format("%s: the engine gave no number (%s)", what, tostring(v)), 3)
  end
  return v
end

-- got within rel (relative, default 1%) of want.
function M.near(lab, what, got, want, rel)
  if not lab.headless then return end
  rel = rel or 0.01
  num(what, got)
  local ok = math.abs(got - want) <= rel * math.abs(want)
  print(string.format("figure  %-46s engine %-12.6g course %-12.6g %s", what, got, want,
                      ok and "ok" or "MISMATCH"))
  if not ok then
    error(string.format("%s: the engine gives %.6g but the course says %.6g (tolerance %g%%)",
                        what, got, want, rel * 100), 2)
  end
end

-- A figure of the seed article or the outline (the textbook accounting's):
-- checked as M.near when the learner follows the textbook (kvlab
-- --accounting textbook); under a real release the lesson says the
-- release's own figure, so it is only printed beside the seed's.
function M.seed(lab, what, got, want, rel)
  if not lab.headless then return end
  if lab.release.textbook then return M.near(lab, what, got, want, rel) end
  num(what, got)
  print(string.format("figure  %-46s engine %-12.6g seed %-12.6g (vLLM %s's own)", what, got, want,
                      lab.release.vllm_version))
end

-- lo <= got <= hi (for the course's "roughly" figures).
function M.between(lab, what, got, lo, hi, seed)
  if not lab.headless then return end
  if seed and not lab.release.textbook then return M.seed(lab, what, got, (lo + hi) / 2) end
  num(what, got)
  local ok = got >= lo and got <= hi
  print(string.format("figure  %-46s engine %-12.6g course %g..%g %s", what, got, lo, hi,
                      ok and "ok" or "MISMATCH"))
  if not ok then
    error(string.format("%s: the engine gives %.6g, outside the course's %g..%g", what, got, lo, hi), 2)
  end
end

-- A condition the course states in words.
function M.holds(lab, what, cond)
  if not lab.headless then return end
  print(string.format("figure  %-46s %s", what, cond and "ok" or "MISMATCH"))
  if not cond then error(what .. ": does not hold", 2) end
end

return M

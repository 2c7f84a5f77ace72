-- Choosing round targets for goals and questions from engine figures, so a
-- lesson never types a number the engine could compute.
local M = {}

-- A round number r with lo < r <= hi, preferring the roundest (1, 2, 5 x 10^k
-- steps), nearest the middle. nil when the range holds no integer.
function M.between(lo, hi)
  if hi <= lo then return nil end
  local mid = (lo + hi) / 2
  local bands = { { lo + (hi - lo) / 4, hi - (hi - lo) / 4 }, { lo, hi } }
  for _, band in ipairs(bands) do
    for _, step in ipairs({ 1000, 500, 100, 50, 10, 5, 2, 1 }) do
      local best
      for r = math.ceil(band[1] / step) * step, band[2], step do
        if r > lo and r <= hi and r > 0 and (not best or math.abs(r - mid) < math.abs(best - mid)) then
          best = r
        end
      end
      if best then return best end
    end
  end
  return nil
end

return M

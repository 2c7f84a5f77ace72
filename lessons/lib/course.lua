-- lib.course: the course's server settings, kept in one place.
--
-- Every lesson starts its server through course.server{...}. The figures
-- the lessons quote (example A's 433,888 tokens, example B's 2.83 GiB) follow
-- the source document's arithmetic, which kvlab calls the textbook
-- accounting: a fixed CUDA context, CUDA graphs and NCCL all come off the
-- budget. A real vLLM release accounts a little differently (kvlab serve
-- --accounting release --vllm-version X shows how); lessons 1 and 20 show
-- the difference, and everything else asks for the textbook on purpose.
local course = {}

-- The accounting every lesson's server uses.
course.ACCOUNTING = "textbook"

-- A copy of flags with the course's accounting added (a lesson that names an
-- accounting keeps its own).
function course.server(flags)
  local t = {}
  for k, v in pairs(flags or {}) do t[k] = v end
  if t.accounting == nil then t.accounting = course.ACCOUNTING end
  return t
end

return course

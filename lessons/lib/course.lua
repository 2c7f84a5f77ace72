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

-- The terms in the order vLLM meets them, with the names a learner reads.
local TERMS = {
  { "weights", "weights" }, { "activation", "activation" }, { "cudagraph", "CUDA graphs" },
  { "cuda_context", "CUDA context" }, { "nccl", "NCCL" }, { "non_torch", "non-torch" },
  { "kv_cache", "KV cache" },
}

local function term_of(plan, name)
  for _, t in ipairs(plan.terms or {}) do
    if t.name == name then return t end
  end
end

-- A page that sets the course's figures beside what a real release would
-- log for the same flags (the newest, kvlab's default accounting), and says
-- which terms differ. fmt is lib.fmt.
function course.release_page(lab, fmt, title)
  local here = lab.plan()
  local rel = here and lab.what_if({ accounting = "release" })
  if not rel then return end
  lab.page(title or "What a real vLLM would print")
  lab.say("These figures follow the course's arithmetic. A real vLLM sizes the pool its own way; " ..
    "for the same flags, vLLM %s (GiB):", rel.vllm_version)
  local rows = { { "", "course", rel.vllm_version } }
  for _, t in ipairs(TERMS) do
    local a, b = term_of(here, t[1]), term_of(rel, t[1])
    local function cell(x)
      if not x or (not x.counted and x.gib == 0) then return "  -" end
      local s = string.format("%.2f", x.gib)
      return x.counted and s or "(" .. s .. ")"
    end
    rows[#rows + 1] = { t[2], cell(a), cell(b) }
  end
  lab.say("%s", fmt.table(rows))
  local ca, cb = term_of(here, "cuda_context"), term_of(rel, "cuda_context")
  lab.say("In parentheses: used, but not taken off that release's budget%s. Its activation peak " ..
    "is a forward pass or a dummy sampler pass over the vocabulary, whichever is larger.",
    (ca and cb and ca.counted and not cb.counted) and " (the context exists before vLLM measures)" or "")
  for _, line in ipairs(rel.log) do
    if line:find("KV cache size", 1, true) or line:find("Error", 1, true) then lab.say("%s", fmt.quote(line)) end
  end
  lab.say("Each release differs a little (kvlab serve --vllm-version X shows any). " ..
    "If the server's log disagrees with both, trust the server: its figures are measured.")
  lab.pause()
end

return course

-- lib.course: the course's running examples and server settings, kept in
-- one place.
--
-- The course comes back to three set-ups again and again, and calls them by
-- letter. "Example B" must mean one set of figures in every lesson, so each
-- is one row of EXAMPLES below and a lesson starts it with
-- course.example("B", {...extra flags}) (or course.start). Lessons that run
-- some other server still go through course.server{...}.
--
-- Every server a lesson starts follows the learner's release (lab.release:
-- kvlab --vllm-version V, the flags view's vllm-version row; the newest by
-- default), so the figures, outcomes and goals are that release's. With
-- kvlab --accounting textbook they follow the source document's arithmetic
-- instead (a fixed CUDA context, CUDA graphs and NCCL all off the budget:
-- the figures the seed article and the outline quote, such as example A's
-- 433,888 tokens).
--
-- Under kvlab check, course.note(lab, "B") prints the running example's
-- figures as one line ("example B +max-model-len=8192: kv_cache_gib=2.83
-- ..."), so the golden transcripts hold every figure a lesson quotes for an
-- example; tests/sh/test_course_examples.sh checks that each is the same in
-- every lesson and what `kvlab serve ...` gives under the same release.
local course = {}

-- The learner's release ({vllm_version=, accounting=, textbook=}, as
-- lab.release), known before run(lab) so the examples below can follow it.
local release = require("lib.release")
course.RELEASE = release

-- The accounting and release every lesson's server uses: the learner's.
function course.release(lab)
  return lab.release
end

-- true when the learner chose the textbook accounting (the seed's figures).
function course.textbook(lab)
  return lab.release.textbook
end

-- How the text names the accounting in force: "vLLM 0.33.0" or "the textbook arithmetic".
function course.release_name(lab)
  if lab.release.textbook then return "the textbook arithmetic" end
  return "vLLM " .. lab.release.vllm_version
end

course.MODEL_8B = "meta-llama/Llama-3.1-8B-Instruct"
course.MODEL_70B = "meta-llama/Llama-3.1-70B-Instruct"

-- The running examples. `flags` are the server's flags (lab.start's table);
-- `what` is how the text names it; `id` the flags that make it that example
-- (a lesson may change any other flag and still call it the example).
course.EXAMPLES = {
  A = {
    what = "Llama 3.1 8B in bf16 on one H100 80GB, utilization 0.9",
    flags = { model = course.MODEL_8B, gpu = "h100-80gb", ["gpu-memory-utilization"] = 0.9 },
    id = { "model", "gpu", "gpu-memory-gib" },
  },
  -- The card reports 23.64 GiB (the driver's total, assets/gpus.json); the
  -- seed article read 23.5 GiB, which the textbook accounting keeps so its
  -- figures (2.83 GiB for the cache) come back.
  B = {
    what = release.textbook and
           "Llama 3.1 8B on an RTX 4090 that reports 23.5 GiB (the seed's reading), " ..
           "--max-num-batched-tokens 8192, no --max-model-len" or
           "Llama 3.1 8B on an RTX 4090 (it reports 23.64 GiB), " ..
           "--max-num-batched-tokens 8192, no --max-model-len",
    flags = { model = course.MODEL_8B, gpu = "rtx-4090", ["gpu-memory-gib"] = release.textbook and 23.5 or nil,
              ["gpu-memory-utilization"] = 0.9, ["max-num-batched-tokens"] = 8192 },
    id = { "model", "gpu", "gpu-memory-gib" },
  },
  C = {
    what = "Llama 3.1 70B with FP8 weights on one H100 80GB",
    flags = { model = course.MODEL_70B, gpu = "h100-80gb", quantization = "fp8",
              ["gpu-memory-utilization"] = 0.9, ["max-model-len"] = 8192,
              ["max-num-batched-tokens"] = 8192 },
    id = { "model", "gpu", "gpu-memory-gib" },
  },
}

-- The flags a note compares with the example's own (everything a server
-- started by a lesson may set that shapes its plan or its traffic).
local NOTE_FLAGS = {
  "model", "gpu", "gpu-memory-gib", "gpu-memory-utilization", "max-model-len", "max-num-seqs",
  "max-num-batched-tokens", "block-size", "kv-cache-dtype", "quantization", "tensor-parallel-size",
  "enable-prefix-caching", "enforce-eager", "dtype", "kv-heads", "kv-cache", "contiguous",
}

-- What lab.flag reads for a flag nobody set (the same as not giving it).
local DEFAULTS = {
  ["block-size"] = "16", ["kv-cache-dtype"] = "auto", quantization = "none", ["tensor-parallel-size"] = "1",
  ["enable-prefix-caching"] = "true", ["enforce-eager"] = "false", dtype = "auto", ["kv-cache"] = "on",
  contiguous = "off",
}

-- The plan's figures a note prints, and how (the way lessons format them).
local NOTE_FIGURES = {
  { "starts", "bool" }, { "error_kind", "str" },
  { "gpu_total_gib", "%.2f" }, { "budget_gib", "%.2f" }, { "weights_gib", "%.2f" },
  { "activation_gib", "%.2f" }, { "cudagraph_gib", "%.2f" }, { "cuda_context_gib", "%.2f" },
  { "nccl_gib", "%.2f" }, { "kv_cache_gib", "%.2f" }, { "needed_gib", "%.2f" },
  { "kv_bytes_per_token", "%d" }, { "num_blocks", "%d" }, { "kv_cache_tokens", "%d" },
  { "max_model_len", "%d" }, { "max_concurrency", "%.2f" }, { "estimated_max_model_len", "%d" },
}

local function copy(t)
  local out = {}
  for k, v in pairs(t or {}) do out[k] = v end
  return out
end

-- A copy of flags for lab.start. The runtime adds the learner's accounting
-- and release (lab.release) to every start; a lesson that names its own
-- accounting keeps it.
function course.server(flags)
  return copy(flags)
end

local function row(name)
  return course.EXAMPLES[name] or error("lib.course: no running example '" .. tostring(name) .. "'", 3)
end

-- The server flags of running example `name` ("A", "B", "C"), with `extra`
-- on top (a value of "" drops a flag: the default).
function course.example(name, extra)
  local t = copy(row(name).flags)
  for k, v in pairs(extra or {}) do
    if v == "" then t[k] = nil else t[k] = v end
  end
  return course.server(t)
end

-- How the text names example `name`: "Llama 3.1 8B on an RTX 4090 that ...".
function course.what(name)
  return row(name).what
end

-- A flag's value as text, for comparing ("0.90" and "0.9" are the same).
local function same(a, b)
  a, b = tostring(a or ""), tostring(b or "")
  if a == b then return true end
  local x, y = tonumber(a), tonumber(b)
  return x ~= nil and y ~= nil and math.abs(x - y) <= 1e-9 * math.max(1, math.abs(x))
end

-- Flags of the lesson runtime that `kvlab serve` does not take: kv-heads
-- changes the plan (a what-if model), the others only the engine's mode.
local LAB_ONLY = { ["kv-heads"] = "plan", ["kv-cache"] = "engine", contiguous = "engine" }

-- The flags of the running server that differ from example `name`'s, as
-- "+flag=value" words in a fixed order ("" when none), and the same server
-- as `kvlab serve` arguments (nil when kvlab serve cannot start it).
local function variant(lab, name)
  local ex = row(name)
  local words, serve = {}, { ex.flags.model }
  local servable = true
  for _, k in ipairs(NOTE_FLAGS) do
    local now, want = lab.flag(k), ex.flags[k]
    if now == DEFAULTS[k] then now = "" end
    if not same(now, want) then words[#words + 1] = string.format("+%s=%s", k, now) end
    if LAB_ONLY[k] == "plan" and now ~= "" then servable = false end
    if k ~= "model" and not LAB_ONLY[k] and now ~= "" then
      serve[#serve + 1] = string.format("--%s %s", k, now)
    end
  end
  return table.concat(words, " "), servable and table.concat(serve, " ") or nil
end

-- Under kvlab check: print the figures of the server now running (or the
-- last one refused) as running example `name`, one line the transcript keeps.
-- Errors when the server is not that example at all (another model or card).
-- In the app it does nothing. Returns the plan.
function course.note(lab, name)
  local p = lab.plan()
  if not lab.headless then return p end
  local ex = row(name)
  for _, k in ipairs(ex.id) do
    if not same(lab.flag(k), ex.flags[k]) then
      error(string.format("lib.course: this server is not example %s: --%s is '%s', the example has '%s'",
        name, k, lab.flag(k), tostring(ex.flags[k] or "")), 2)
    end
  end
  if not p then error("lib.course: example " .. name .. " has no plan (start it first)", 2) end
  local cells = {}
  for _, f in ipairs(NOTE_FIGURES) do
    local v = p[f[1]]
    local s
    if f[2] == "bool" then s = v and "true" or "false"
    elseif f[2] == "str" then s = (v == nil or v == "") and "-" or tostring(v)
    elseif type(v) ~= "number" or v ~= v then s = "-"
    elseif f[2] == "%d" then s = string.format("%d", math.floor(v + 0.5))
    else s = string.format(f[2], v) end
    cells[#cells + 1] = f[1] .. "=" .. s
  end
  local var, serve = variant(lab, name)
  print(string.format("example %s%s: %s%s", name, var ~= "" and (" " .. var) or "", table.concat(cells, " "),
    serve and (" | serve " .. serve) or ""))
  return p
end

-- Start running example `name` with `extra` flags and note its figures.
-- Returns lab.start's ok, err, why.
function course.start(lab, name, extra)
  local ok, err, why = lab.start(course.example(name, extra))
  course.note(lab, name)
  return ok, err, why
end

-- Restart with `changes` (as lab.restart) and note the figures as example
-- `name`. Returns lab.restart's ok, err.
function course.restart(lab, name, changes)
  local ok, err = lab.restart(changes or {})
  course.note(lab, name)
  return ok, err
end

-- Weight formats vLLM reads from a checkpoint quantized that way (its
-- quantization_config): on 16-bit weights these flags are no fix, the
-- weights would not load. fp8 and bitsandbytes quantize as they load.
local CHECKPOINT_QUANT = { awq = "AWQ", awq_marlin = "AWQ", gptq = "GPTQ", gptq_marlin = "GPTQ",
                           mxfp4 = "MXFP4", ["compressed-tensors"] = "compressed-tensors" }

-- The line a page says when the running server's --quantization needs a
-- checkpoint the model is not (nil when it is a fix): "Not counted:
-- --quantization awq needs an AWQ checkpoint ...". Goals that take a
-- quantization refuse it while this is not nil.
function course.checkpoint_quant(lab)
  local q = lab.flag("quantization")
  local kind = CHECKPOINT_QUANT[q]
  local cfg = lab.config()
  if not kind or (cfg and (cfg.quantization_config or (cfg.text_config or {}).quantization_config)) then return nil end
  return string.format("Not counted: --quantization %s needs an %s checkpoint of the model; these 16-bit " ..
    "weights would not load%s.", q, kind, lab.release.textbook and " (the textbook sizes such a checkpoint to show " ..
    "what it would give)" or "")
end

-- A failed start's error as a page may show it. vLLM's own errors are
-- quoted as the engine words them for the release; where the engine sums up
-- a CUDA out-of-memory in its own words (PyTorch's error names only the one
-- allocation that failed, which kvlab cannot know), the page says so rather
-- than passing the summary off as PyTorch's text.
function course.error_text(plan)
  local err = plan and plan.error or ""
  local rest = err:match("^torch%.OutOfMemoryError: CUDA out of memory (.*)$")
  if rest and not rest:match("^%. Tried to allocate") then
    return "PyTorch stops it with CUDA out of memory (torch.OutOfMemoryError: CUDA out of memory. Tried to " ..
      "allocate ...). kvlab's account: out of memory " .. rest
  end
  return err
end

-- The start-up line that states the pool's size, as the release words it:
-- V1's "GPU KV cache size: N tokens", or V0's "# GPU blocks: N, # CPU
-- blocks: M" (0.6-0.7). Returns the text to highlight it by, the whole
-- line ("" when the log has neither) and true when it counts tokens.
function course.pool_line(lab)
  for _, key in ipairs({ "GPU KV cache size", "# GPU blocks" }) do
    for _, l in ipairs(lab.log()) do
      if l.text:find(key, 1, true) then return key, l.text, key == "GPU KV cache size" end
    end
  end
  return "GPU KV cache size", "", true
end

-- Why a higher max-num-seqs took pool at start-up, from the two plans'
-- counted terms (before a, after b): "CUDA graphs are captured for batches
-- up to it, and the sampler is profiled with that many requests", or nil
-- when neither term moved.
function course.seqs_cost(a, b)
  local function counted(plan, name)
    for _, t in ipairs(plan.terms or {}) do
      if t.name == name then return t.counted and t.gib or 0 end
    end
    return 0
  end
  local why = {}
  if counted(b, "cudagraph") > counted(a, "cudagraph") + 0.005 then
    why[#why + 1] = "CUDA graphs are captured for batches up to it"
  end
  if counted(b, "activation") > counted(a, "activation") + 0.005 then
    why[#why + 1] = "the sampler is profiled with that many requests"
  end
  return #why > 0 and table.concat(why, ", and ") or nil
end

-- The terms in the order vLLM meets them, with the names a learner reads.
local TERMS = {
  { "weights", "weights" }, { "activation", "activation" }, { "cudagraph", "CUDA graphs" },
  { "cuda_context", "CUDA context" }, { "nccl", "NCCL" }, { "non_torch", "non-torch" },
  { "kv_cache", "KV cache" },
}

-- The name a learner reads for a plan term ("cuda_context" -> "CUDA context").
function course.term_label(name)
  for _, t in ipairs(TERMS) do
    if t[1] == name then return t[2] end
  end
  return name
end

local function term_of(plan, name)
  for _, t in ipairs(plan.terms or {}) do
    if t.name == name then return t end
  end
end

-- A page that sets the figures the learner followed beside the other
-- accounting for the same flags, and says which terms differ. Under the
-- textbook accounting: beside what the newest vLLM release would log (the
-- title given). Under a release: beside the textbook arithmetic of the
-- course's source (kvlab --accounting textbook), the page that reconciles
-- the course's quoted figures. fmt is lib.fmt.
function course.release_page(lab, fmt, title)
  local here = lab.plan()
  if not here then return end
  local textbook = lab.release.textbook
  local other = lab.what_if({ accounting = textbook and "release" or "textbook" })
  if not other then return end
  local mine_name = textbook and "course" or here.vllm_version
  local other_name = textbook and other.vllm_version or "textbook"
  if textbook then
    lab.page(title or "What a real vLLM would print")
    lab.say("These figures follow the course's arithmetic. A real vLLM sizes the pool its own way; " ..
      "for the same flags, vLLM %s (GiB):", other.vllm_version)
  else
    lab.page("The same figures in the textbook")
    lab.say("These figures are vLLM %s's, the release kvlab follows for you. The course's source " ..
      "document does the subtraction its own simplified way, the textbook arithmetic (a fixed CUDA " ..
      "context, the CUDA graphs and NCCL all off the budget; kvlab --accounting textbook runs the whole " ..
      "course so). For the same flags (GiB):", here.vllm_version)
  end
  local rows = { { "", mine_name, other_name } }
  for _, t in ipairs(TERMS) do
    local a, b = term_of(here, t[1]), term_of(other, t[1])
    local function cell(x)
      if not x or (not x.counted and x.gib == 0) then return "  -" end
      local s = string.format("%.2f", x.gib)
      return x.counted and s or "(" .. s .. ")"
    end
    rows[#rows + 1] = { t[2], cell(a), cell(b) }
  end
  rows[#rows + 1] = { "tokens", fmt.int(here.kv_cache_tokens), fmt.int(other.kv_cache_tokens) }
  lab.say("%s", fmt.table(rows))
  local rel, tb = textbook and other or here, textbook and here or other
  local ca, cb = term_of(tb, "cuda_context"), term_of(rel, "cuda_context")
  lab.say("In parentheses: used, but not taken off that column's budget%s. vLLM's activation peak " ..
    "is a forward pass or a dummy sampler pass over the vocabulary, whichever is larger.",
    (ca and cb and ca.counted and not cb.counted) and " (vLLM's context exists before it measures)" or "")
  if textbook then
    for _, line in ipairs(other.log) do
      if line:find("GPU KV cache size", 1, true) or line:find("Error", 1, true) then lab.say("%s", fmt.quote(line)) end
    end
    lab.say("Each release differs a little (kvlab serve --vllm-version X shows any). " ..
      "If the server's log disagrees with both, trust the server: its figures are measured.")
  else
    lab.say("The textbook's figures are the ones the course's sources quote; the log in the log view " ..
      "is vLLM %s's. If a real server's log disagrees with both, trust the server: its figures are " ..
      "measured.", here.vllm_version)
  end
  lab.pause()
end

return course

-- Lesson 14: every start-up flag, and which term of the memory subtraction it moves.
local fmt = require("lib.fmt")
local course = require("lib.course")

-- Example B: the 4090, where every GiB shows.
local BASE = course.example("B", { ["max-model-len"] = 8192 })

-- The answers a learner picks from. `key` names what the engine compares.
local CHOICES = {
  { key = "budget", text = "the budget" },
  { key = "weights", text = "the weights" },
  { key = "activation", text = "the activation peak" },
  { key = "cudagraph", text = "the CUDA graphs" },
  { key = "per_token", text = "the bytes per token" },
  { key = "starts", text = "only whether it starts" },
  { key = "none", text = "nothing: the pool moves < 1%" },
}

-- The table's lines other than `skip` (a set of keys) that moved from a to
-- b, as " Also moved: the activation peak 1.83 -> 0.84 GiB, ..." ("" if
-- none), so every changed line of the table is told.
local LINE_NAMES = { { "budget", "the budget" }, { "weights", "the weights" }, { "activation", "the activation peak" },
                     { "cudagraph", "the CUDA graphs" }, { "rest", "the rest" } }
local function others_moved(a, b, skip)
  local out = {}
  for _, l in ipairs(LINE_NAMES) do
    if not skip[l[1]] and string.format("%.2f", a[l[1]]) ~= string.format("%.2f", b[l[1]]) then
      out[#out + 1] = string.format("%s %.2f -> %.2f GiB", l[2], a[l[1]], b[l[1]])
    end
  end
  return #out > 0 and (" Also moved: " .. table.concat(out, ", ") .. ".") or ""
end

-- One round per flag: the value kvlab check types, a hint for changing it,
-- a hint for the question (what the flag does, not which line to pick), and
-- the explanation shown once the answer is right (from the two plans).
local ROUNDS = {
  { flag = "gpu-memory-utilization", value = "0.85", hint = "Try 0.85.",
    ask_hint = "Utilization is the share of the card vLLM may use: which line is 'card x share'?",
    explain = function(a, b)
      local others = math.abs((a.budget - a.kv) - (b.budget - b.kv)) < 0.005
      return string.format("The budget is the card times the utilization: %.2f GiB became %.2f GiB%s, so the " ..
        "pool went from %.2f to %.2f GiB, %s %.2f GiB.", a.budget, b.budget,
        others and ", and nothing else moved" or "", a.kv, b.kv, b.kv < a.kv and "losing" or "gaining",
        math.abs(a.kv - b.kv))
    end },
  { flag = "quantization", value = "fp8", hint = "Try fp8 weights.",
    ask_hint = "fp8 weights store each parameter in one byte instead of two.",
    explain = function(a, b)
      return string.format("The weights shrank from %.2f to %.2f GiB, and every GiB they gave back " ..
        "went to the pool: %.2f GiB became %.2f GiB.", a.weights, b.weights, a.kv, b.kv)
    end },
  -- 4096, or where the release refuses a step shorter than max-model-len
  -- (V0 without chunked prefill) 16384, from the engine
  { flag = "max-num-batched-tokens", value = "4096",
    pick = function(_, lab) return lab.what_if{ ["max-num-batched-tokens"] = 4096 } and 4096 or 16384 end,
    ask_hint = "Before sizing the pool, vLLM runs one dummy batch of max-num-batched-tokens tokens and " ..
               "keeps its peak.",
    explain = function(a, b)
      return string.format("The profile run is a batch of max-num-batched-tokens tokens, so its " ..
        "activation peak went from %.2f to %.2f GiB: %s.%s", a.activation, b.activation,
        b.activation < a.activation and "a smaller batch, more pool, slower prefill"
          or "a bigger batch, less pool, faster prefill",
        others_moved(a, b, { activation = true, kv = true }))
    end },
  { flag = "enforce-eager", value = "true", hint = "Set it to true.",
    ask_hint = "Eager mode runs the model without capturing CUDA graphs.",
    explain = function(a, b)
      local compile = math.abs(a.rest - b.rest) >= 0.005
      if not a.cg_counted then
        -- the release captures the graphs after it sizes the pool
        return string.format("This release captures CUDA graphs after it has sized the pool, outside the " ..
          "budget (the figure in parentheses): eager mode frees those %.2f GiB above the budget, not in the " ..
          "pool, which stays %.2f GiB. Decode steps get slower.%s", a.cudagraph, b.kv,
          others_moved(a, b, { cudagraph = true }))
      end
      return string.format("Without CUDA graphs vLLM holds nothing back for them (%.2f GiB became " ..
        "%.2f GiB): more pool, slower decode steps.%s%s", a.cudagraph, b.cudagraph,
        compile and " Eager mode also skips torch.compile in this release, so what a cold compile " ..
          "leaves behind goes too." or "",
        others_moved(a, b, { cudagraph = true }))
    end },
  { flag = "kv-cache-dtype", value = "fp8", need = "fp8", hint = "Select kv-cache-dtype, press Enter and type fp8.",
    ask_hint = "An fp8 cache stores each key and value in one byte: does that change what start-up " ..
               "subtracts, or what each token costs?",
    explain = function(a, b)
      return string.format("No term moved: the pool is %.2f GiB either way. Each token costs half as " ..
        "much (%s instead of %s), so the same GiB hold %s tokens instead of %s.", b.kv,
        fmt.bytes(b.per_token), fmt.bytes(a.per_token), fmt.int(b.tokens), fmt.int(a.tokens))
    end },
  { flag = "block-size", value = "32", hint = "Try 32.",
    ask_hint = "A block is how the pool is cut up, not how big it is.",
    explain = function(a, b)
      return string.format("The pool is cut into bigger pieces, %s tokens in all where it was %s: " ..
        "within a block of the same GiB. Block size matters for waste and sharing, not for the " ..
        "start-up pool.", fmt.int(b.tokens), fmt.int(a.tokens))
    end },
  { flag = "enable-prefix-caching", value = "false", hint = "Set it to false.",
    ask_hint = "Prefix caching decides at run time which blocks requests share; start-up measures " ..
               "nothing with it.",
    explain = function()
      return "Prefix caching changes nothing at start-up: it decides at run time whether requests " ..
        "that begin alike share blocks (lesson 15)."
    end },
  { flag = "max-num-seqs", value = "64", hint = "Try 64.",
    ask_hint = "max-num-seqs caps how many requests run at once. Does start-up size anything by it here?",
    explain = function(a, b)
      if math.abs(a.kv - b.kv) < 0.005 then
        return string.format("The pool stayed at %.2f GiB: here max-num-seqs moved nothing that start-up takes " ..
          "off the budget. It caps how many requests the scheduler runs at once inside the pool (lessons 16 " ..
          "and 17).", a.kv)
      end
      local why = {}
      local cg_moved = b.cg_counted and math.abs(b.cudagraph - a.cudagraph) > 0.005
      local act_moved = math.abs(b.activation - a.activation) > 0.005
      if cg_moved then
        why[#why + 1] = string.format("captures CUDA graphs for batches up to max-num-seqs (%.2f -> %.2f GiB)",
          a.cudagraph, b.cudagraph)
      end
      if act_moved then
        why[#why + 1] = string.format("profiles the sampler with that many requests (activation %.2f -> %.2f GiB)",
          a.activation, b.activation)
      end
      return string.format("The pool went from %.2f to %.2f GiB%s.%s Beyond that, max-num-seqs caps how many " ..
        "requests run at once (lessons 16 and 17).", a.kv, b.kv,
        #why > 0 and (": this release " .. table.concat(why, " and ") .. ", before it sizes the pool") or "",
        others_moved(a, b, { cudagraph = cg_moved, activation = act_moved }))
    end },
  -- the value: the smallest power of two longer than the pool holds, so one
  -- request of it does not fit (32,768 on the textbook's 23,184 tokens)
  { flag = "max-model-len", value = "32768", hint = "Try 32768.",
    pick = function(a)
      local v = 1024
      while v <= a.tokens do v = v * 2 end
      return v
    end,
    ask_hint = "max-model-len is the longest request the server promises to take. Compare it with " ..
               "the tokens the pool holds, and read the starts line.",
    explain = function(a, b)
      if b.starts then
        return "max-model-len sets nothing aside: the pool is the same, and it still holds one " ..
          "request of that length, so vLLM agreed to start."
      end
      return string.format("max-model-len sets nothing aside: every line is as it was, but one " ..
        "%s-token request no longer fits in the %s tokens of pool, so vLLM refuses to start " ..
        "(lesson 7's check).", fmt.int(b.max_model_len), fmt.int(b.tokens))
    end },
}

local TERMS = { "budget", "weights", "activation", "cudagraph" }

local function snapshot(lab)
  local p = lab.plan()
  local cg_counted = true
  for _, t in ipairs(p.terms or {}) do
    if t.name == "cudagraph" then cg_counted = t.counted end
  end
  return {
    cg_counted = cg_counted,
    rest = p.budget_gib - p.weights_gib - p.activation_gib - (cg_counted and p.cudagraph_gib or 0) - p.kv_cache_gib,
    starts = p.starts, budget = p.budget_gib, weights = p.weights_gib, activation = p.activation_gib,
    cudagraph = p.cudagraph_gib, context = p.cuda_context_gib, nccl = p.nccl_gib, kv = p.kv_cache_gib, per_token = p.kv_bytes_per_token,
    tokens = p.kv_cache_tokens, max_model_len = p.max_model_len,
  }
end

-- What the CUDA graphs take off the budget in plan snapshot s: 0 where the
-- release captures them after the pool is sized (the table's parentheses).
local function cg_off(s)
  return s.cg_counted and s.cudagraph or 0
end

-- Why choice `key` is not the answer for the move from a to b (whose answer
-- is `right`), read from the two plans: the line it names, before and after.
local NAMES = { budget = "The budget", weights = "The weights", activation = "The activation peak",
                cudagraph = "The CUDA graphs" }
local function why_not(key, right, a, b)
  if key == "cudagraph" and cg_off(a) == cg_off(b) then
    -- in parentheses: captured after the pool is sized, outside the budget
    return string.format("The CUDA graphs line reads (%.2f) before and (%.2f) after: in parentheses, outside the " ..
      "budget, so it is not a term of the subtraction.", a.cudagraph, b.cudagraph)
  end
  if NAMES[key] then
    local moved = math.abs(b[key] - a[key]) > 0.005
    return string.format("%s line reads %.2f GiB before and %.2f GiB after%s.", NAMES[key], a[key], b[key],
      moved and ": another line moved more" or ": it did not move")
  elseif key == "per_token" then
    return string.format("The bytes per token read %s before and after: the price of a token did not change.",
      fmt.bytes(a.per_token))
  elseif key == "starts" then
    if a.starts == b.starts then
      return string.format("The server %s before and after: the starts line did not change.",
        a.starts and "starts" or "refuses")
    end
    return "Whether it starts changed, but because a term moved first: which one?"
  end
  -- "none"
  if right == "starts" then
    return "Something did change: the starts line. The pool is the same, but the server no longer starts."
  end
  if right == "per_token" then
    -- the GiB can stay put while the tokens move: say which one moved
    return string.format("The pool holds %.2f GiB before and %.2f GiB after, but %s tokens where it held %s: " ..
      "the same memory holds more or fewer tokens, so something did change.", a.kv, b.kv, fmt.int(b.tokens),
      fmt.int(a.tokens))
  end
  return string.format("The pool went from %.2f to %.2f GiB (%s tokens to %s): more than 1%%.", a.kv, b.kv,
    fmt.int(a.tokens), fmt.int(b.tokens))
end

-- Which choice describes the move from a to b, judged on the engine's plans.
local function judge(a, b)
  if a.per_token ~= b.per_token then return "per_token" end
  local best, size = nil, 0
  for _, t in ipairs(TERMS) do
    -- graphs in parentheses are captured after the pool is sized: no term
    local d = t == "cudagraph" and math.abs(cg_off(b) - cg_off(a)) or math.abs(b[t] - a[t])
    if d > size then best, size = t, d end
  end
  if best and size > 0.01 * math.max(a.kv, 0.01) then return best end
  if a.starts ~= b.starts then return "starts" end
  return "none"
end

-- The app takes a choice by its letter up to e, so each round offers five:
-- the right one and four others, dropping first those least like a mix-up.
local DROP_FIRST = { "cudagraph", "activation", "budget", "starts", "none", "weights", "per_token" }

-- keep: other lines that moved too (a learner who picks one of them gets
-- "another line moved more"), never dropped while others can go.
local function round_choices(key, keep)
  local drop, dropped = {}, 0
  for pass = 1, 2 do
    for _, k in ipairs(DROP_FIRST) do
      if dropped == #CHOICES - 5 then break end
      if k ~= key and not drop[k] and (pass == 2 or not keep[k]) then drop[k] = true; dropped = dropped + 1 end
    end
  end
  local list = {}
  for _, c in ipairs(CHOICES) do if not drop[c.key] then list[#list + 1] = c end end
  return list
end

-- The plan's terms side by side (before / after), or one column when b is nil.
local function describe(a, b, value)
  local two = b ~= nil
  local rows = { two and { "", "example B", value or "after" } or nil }
  local function row(name, x, y, f) rows[#rows + 1] = two and { name, f(x), f(y) } or { name, f(x) } end
  b = b or a
  local gib = function(v) return string.format("%.2f GiB", v) end
  row("budget", a.budget, b.budget, gib)
  row("weights", a.weights, b.weights, gib)
  row("activation", a.activation, b.activation, gib)
  row("CUDA graphs", a, b, function(s)
    -- none (eager) beside graphs outside the budget reads as outside too
    local out = not s.cg_counted or (s.cudagraph == 0 and not (a.cg_counted and b.cg_counted))
    return out and string.format("(%.2f)", s.cudagraph) or gib(s.cudagraph)
  end)
  -- everything else the release takes off the budget (the CUDA context,
  -- NCCL, non-torch memory: which, by release), so the column adds up
  row("the rest", a.rest, b.rest, gib)
  row("KV pool", a.kv, b.kv, gib)
  row("per token", a.per_token, b.per_token, fmt.bytes)
  row("tokens", a.tokens, b.tokens, fmt.int)
  row("starts", a.starts, b.starts, function(v) return v and "yes" or "no" end)
  return fmt.table(rows)
end

-- Put every flag this lesson offers back to the example's value.
local function restore(lab)
  local changes = {}
  for _, r in ipairs(ROUNDS) do changes[r.flag] = BASE[r.flag] or "" end
  local ok, err = lab.restart(changes)
  if not ok then error("the example did not restart: " .. tostring(err)) end
end

local flags = {}
for i, r in ipairs(ROUNDS) do flags[i] = r.flag end

return {
  id = 14,
  title = "The flags that shape the cache",
  flags = flags,
  run = function(lab)
    lab.page("The subtraction")
    local ok, err = lab.start(BASE)
    course.note(lab, "B")
    if not ok then error("the lesson's server did not start: " .. tostring(err)) end
    local base = snapshot(lab)
    lab.show("memory"); lab.show("flags"); lab.show("log")
    lab.say("Every decision about the KV cache is made once, when the server starts. "
      .. "vLLM takes the budget, subtracts what it measured, and whatever is left becomes the pool:")
    lab.say(describe(base))
    lab.say("The rest: whatever else %s takes off the budget (%s)%s.", course.release_name(lab),
      lab.release.textbook and "the CUDA context and NCCL" or
      "the CUDA context, NCCL and non-torch memory, each where this release counts it",
      base.cg_counted and "" or "; CUDA graphs in parentheses are captured after the pool is sized, " ..
      "outside the budget")
    lab.say("You will now change one flag at a time, starting each time from example B, "
      .. "and say which line of that table it moved. The memory bar and the table show "
      .. "before and after.")
    lab.pause()

    -- a value vLLM refuses before start-up (no plan at all): said, and the
    -- goal waits for another
    lab.on_flag(function(name, value)
      if not lab.plan() then
        lab.say("vLLM refuses --%s %s before start-up, so there is no table to compare: try another value.",
          name, value == "" and "(default)" or value)
      end
    end)
    for i, round in ipairs(ROUNDS) do
      restore(lab)
      lab.page(string.format("Flag %d/%d: %s", i, #ROUNDS, round.flag))
      lab.unhighlight()
      lab.highlight("flags", round.flag)
      local was = lab.flag(round.flag)
      local goal_text
      if round.need then
        lab.say("Change %s (now %s) to %s.", round.flag, was == "" and "the default" or was, round.need)
        goal_text = string.format("Set %s to %s in the flags view.", round.flag, round.need)
      else
        lab.say("Change %s (now %s) to any other value.", round.flag, was == "" and "the default" or was)
        goal_text = string.format("Change %s in the flags view.", round.flag)
      end
      lab.goal{
        text = goal_text,
        check = function()
          -- a value vLLM refuses before start-up leaves no plan to compare
          if not lab.plan() then return false end
          local v = lab.flag(round.flag)
          if round.need then return v:sub(1, #round.need) == round.need end   -- fp8, fp8_e4m3, fp8_e5m2
          return v ~= was
        end,
        hints = { round.pick and string.format("Try %d.", round.pick(base, lab)) or round.hint },
        script = { { round.flag, round.pick and tostring(round.pick(base, lab)) or round.value } },
      }
      local now = snapshot(lab)
      local key = judge(base, now)
      -- a fresh page: the table and the question on one screen
      lab.page(string.format("Flag %d/%d: %s", i, #ROUNDS, round.flag))
      lab.say(describe(base, now, lab.flag(round.flag)))
      if not now.starts then lab.highlight("log", "To serve at least one request") end
      local also = {}
      for _, t in ipairs(TERMS) do
        if t ~= key and math.abs(now[t] - base[t]) > 0.01 * math.max(base.kv, 0.01) then also[t] = true end
      end
      local offered = round_choices(key, also)
      local texts, why, correct = {}, {}, nil
      for j, c in ipairs(offered) do
        texts[j] = c.text
        if c.key == key then correct = j else why[j] = why_not(c.key, key, base, now) end
      end
      lab.ask{
        prompt = "Which term did that move?",
        choices = texts, correct = correct, why = why,
        hints = { round.ask_hint },
        explain = round.explain(base, now),
      }
      if key ~= "none" and key ~= "starts" and key ~= "per_token" then
        lab.highlight("memory", key)
      end
    end

    restore(lab)
    lab.on_flag(nil)
    lab.page("What moves the pool")
    local seqs_plan = lab.what_if{ ["max-num-seqs"] = 64 }
    local seqs_moves = seqs_plan and math.abs(seqs_plan.kv_cache_gib - base.kv) >= 0.005
    -- what it moved, from the two plans (lib.course: the counted terms that grew)
    local seqs_why = seqs_moves and course.seqs_cost(seqs_plan, lab.plan())
    -- which of the two speed levers moved the pool in this release, from the engine
    local trade, still = {}, {}
    for _, lever in ipairs({ { "max-num-batched-tokens", ROUNDS[3].pick(base, lab), "activation" },
                             { "enforce-eager", "true", "graph" } }) do
      local q = lab.what_if{ [lever[1]] = lever[2] }
      if q and math.abs(q.kv_cache_gib - base.kv) >= 0.01 * base.kv then
        trade[#trade + 1] = lever
      elseif q then
        still[#still + 1] = math.abs(q.kv_cache_gib - base.kv) < 0.005
          and string.format("%s (%.2f GiB either way%s)", lever[1], base.kv,
            (lever[3] == "graph" and not base.cg_counted) and ": its graphs are captured outside the budget" or "")
          or string.format("%s (%.2f -> %.2f GiB)", lever[1], base.kv, q.kv_cache_gib)
      end
    end
    local speed = ""
    if #trade > 0 then
      speed = string.format("%s trade%s the %s reserve%s for speed. ", trade[1][1] ..
        (trade[2] and (" and " .. trade[2][1]) or ""), trade[2] and "" or "s",
        trade[1][3] .. (trade[2] and (" and " .. trade[2][3]) or ""), trade[2] and "s" or "")
    end
    if #still > 0 then
      speed = speed .. string.format("In %s %s barely move%s the pool. ", course.release_name(lab),
        table.concat(still, " and "), #still > 1 and "" or "s")
    end
    lab.say("Two levers are big: the share of the card you give vLLM, and the size of "
      .. "the weights, because every GiB they free lands in the pool. The cache dtype "
      .. "changes how many tokens each GiB holds. " .. speed:gsub("%%", "%%%%") .. "max-model-len "
      .. "sets no memory aside at all; it only decides whether vLLM agrees to start. "
      .. "%s what happens inside it, which is the next chapter.",
      seqs_moves and string.format("Prefix caching leaves the start-up pool alone. max-num-seqs moved it here " ..
        "(%.2f GiB at 64, %.2f GiB at the default%s), but both mostly shape", seqs_plan.kv_cache_gib, base.kv,
        seqs_why and ("; " .. seqs_why) or "")
        or "max-num-seqs and prefix caching leave the start-up pool alone: they shape")
    lab.pause()
  end,
}

-- Lesson 21: the playground. Any catalogue model or config.json path, any
-- GPU, any flag, any traffic; then five ways to break a server on purpose.
local fmt = require("lib.fmt")
local course = require("lib.course")

-- Every challenge starts again from example A.
local BASE = course.example("A")

local function with(extra)
  local t = {}
  for k, v in pairs(BASE) do t[k] = v end
  for k, v in pairs(extra or {}) do t[k] = v end
  return t
end

-- Memory outside vLLM's budget, as kvlab models it (the simulator cannot see
-- PyTorch's caching allocator, so this is a stated model, not a measurement):
-- the allocator loses space to fragmentation as batch shapes vary, up to
-- FRAG_SHARE of the card, and every step needs short-lived buffers such as
-- the logits (requests x vocabulary x 4 bytes). When they outgrow the room
-- above the budget, a step fails with CUDA out of memory.
-- Seconds of serving at each offered load in challenge 5's sweep.
local CLIFF_SECONDS = 40

local FRAG_SHARE = 0.06
local SHAPES_SCALE = 32 -- distinct batch shapes for fragmentation to reach ~63% of its cap

-- What the model has seen of the engine running now. It belongs to one
-- engine's life: every restart (a flag change, a challenge) starts it again.
local state = { shapes = {}, nshapes = 0, oom = nil, step = -1 }

local function reset_headroom()
  state.shapes, state.nshapes, state.oom, state.step = {}, 0, nil, -1
end

local function watch_headroom(lab)
  local plan, model, m = lab.plan(), lab.model(), lab.metrics()
  if not plan or not m then return end
  -- a new engine counts its steps from 0 again: whatever restarted it, the
  -- allocator it models is a new one too
  if m.step < state.step then reset_headroom() end
  state.step = m.step
  if m.last_step_tokens == 0 then return end
  local bucket = m.last_step_tokens // 64
  if not state.shapes[bucket] then
    state.shapes[bucket] = true
    state.nshapes = state.nshapes + 1
  end
  local total = plan.gpu_total_bytes
  local headroom = total * (1 - plan.gpu_memory_utilization)
  local frag = FRAG_SHARE * total * (1 - math.exp(-state.nshapes / SHAPES_SCALE))
  local logits = m.last_step_requests * model.vocab_size * 4
  if frag + logits > headroom then
    state.oom = {
      step = m.step, time_s = m.time_s, logits = logits, frag = frag, headroom = headroom,
      util = plan.gpu_memory_utilization, total = total,
    }
    lab.traffic(nil)
    lab.stop()
  end
end

local function apply_traffic(lab)
  local rate = tonumber(lab.flag("request-rate")) or 0
  local p = tonumber(lab.flag("traffic-prompt")) or 512
  local o = tonumber(lab.flag("traffic-output")) or 128
  if rate > 0 then
    lab.traffic({ rate = rate, seed = 21,
      prompt_tokens = { min = math.max(1, p // 2), max = math.max(1, p * 3 // 2) },
      output_tokens = { min = math.max(1, o // 2), max = math.max(1, o * 3 // 2) } })
  else
    lab.traffic(nil)
  end
end

local function restart(lab, extra)
  reset_headroom()
  local ok, err = lab.start(course.server(with(extra)))
  apply_traffic(lab)
  return ok, err
end

-- The bonus challenge: readers take turns on BONUS_DOCS long documents, one
-- request every 1 / BONUS_RATE s of the engine's clock, from the start
-- again whenever the server restarts (its clock starts at 0 again).
local BONUS_DOCS, BONUS_DOC, BONUS_POOL, BONUS_RATE = 8, 2048, 400, 4
local function bonus_traffic(lab)
  local sent, last = 0, -1
  lab.traffic(function(_, now)
    if now < last then sent = 0 end
    last = now
    local out = {}
    while now >= sent / BONUS_RATE do
      out[#out + 1] = { prompt_tokens = 64, output_tokens = 32, prefix_id = "doc" .. (sent % BONUS_DOCS),
                        prefix_tokens = BONUS_DOC }
      sent = sent + 1
    end
    return out
  end)
end

local function challenge_page(lab, n, title)
  lab.page(string.format("Challenge %d/5: %s", n, title))  -- fits the page's border at 80 columns
  lab.unhighlight()
end

-- Golf: how each challenge was solved. What a lever costs, and its place on
-- the cheapest-first list when the plan has none of its own (a plan that
-- fails lists its fixes cheapest first: then the lever's place is there).
local LEVERS = {
  { "max-model-len", "context given up, or asked for" },
  { "max-num-batched-tokens", "a smaller or bigger step" },
  { "max-num-seqs", "fewer or more requests at once" },
  { "gpu-memory-utilization", "headroom outside vLLM's budget" },
  { "kv-cache-dtype", "quality risked: an fp8 KV cache" },
  { "quantization", "quality risked: quantized weights" },
  { "tensor-parallel-size", "a GPU added, or taken away" },
  { "gpu", "another card" },
  { "model", "another model" },
  { "request-rate", "the traffic, not the server" },
  { "traffic-prompt", "the traffic, not the server" },
  { "traffic-output", "the traffic, not the server" },
  { "kv-offloading-size", "host memory for a CPU tier" },
  -- levers no goal here counts (the page says so when one is pulled): a
  -- goal is met only with them back where they were, so they never score
  { "kv-heads" }, { "hf-overrides" }, { "num-gpu-blocks-override" }, { "kv-cache" }, { "contiguous" },
  { "gpu-used-gib" }, { "activation-gib" }, { "cudagraph-gib" }, { "cuda-context-gib" }, { "nccl-gib" },
  { "weights-gib" },
}
local changed = {}   -- flags changed while a challenge's goal was pending
local challenge = 0  -- the challenge whose goal is pending (0: none)
local start_flags = {} -- each lever's value when that goal began

-- The lever's place: on the plan's own fixes (the list the page shows), or
-- else in LEVERS (of those with a cost); the second value says which list.
local function lever_rank(plan, name)
  if plan and plan.fixes then
    for i, f in ipairs(plan.fixes) do
      local at = f.flags:find("--" .. name, 1, true)
      local after = at and f.flags:sub(at + #name + 2, at + #name + 2)
      if at and (after == "" or after == " " or after == "=") then return i, "fixes" end
    end
  end
  for i, l in ipairs(LEVERS) do if l[1] == name then return i, "levers" end end
  return 0
end

-- How many LEVERS have a cost (the rest never score).
local NUM_LEVERS = 0
for _, l in ipairs(LEVERS) do if l[2] then NUM_LEVERS = NUM_LEVERS + 1 end end

-- Before a challenge: the best kept from earlier tries, as a hint.
local function golf_hints(lab, n, hints, par)
  local best = lab.best(string.format("challenge %d", n))
  changed = {}
  -- the flags as the challenge starts: a lever pulled and put back is no lever
  start_flags = {}
  for _, l in ipairs(LEVERS) do start_flags[l[1]] = lab.flag(l[1]) end
  if best then
    hints[#hints + 1] = string.format("You solved this before in %d change%s (%s); the best is %d.", best.changes,
      best.changes == 1 and "" or "s", best.lever, par)
  end
  return hints
end

-- After it: the score (flag changes, the lever's place and cost), kept in
-- the progress file when it beats the best, and said.
local function golf_score(lab, n, changes, par)
  local names, costs, rank, from = {}, {}, 0, nil
  local plan = lab.plan()
  for _, l in ipairs(LEVERS) do
    if changed[l[1]] and lab.flag(l[1]) ~= start_flags[l[1]] then
      names[#names + 1] = l[1]
      costs[#costs + 1] = l[2] or "not a fix"
      local r, list = lever_rank(plan, l[1])
      if r > 0 and (rank == 0 or r < rank) then rank, from = r, list end
    end
  end
  -- name the list the place is on: the fixes kvlab lists for this server
  -- (shown below), or kvlab's levers, cheapest first
  local place = ""
  if rank > 0 and from == "fixes" then
    place = string.format(", #%d on kvlab's cheapest-first list of fixes for this server", rank)
  elseif rank > 0 then
    place = string.format(", lever #%d of %d in kvlab's cheapest-first order", rank, NUM_LEVERS)
  end
  for name in pairs(changed) do
    local known = false
    for _, l in ipairs(LEVERS) do known = known or l[1] == name end
    if not known then names[#names + 1] = name end
  end
  local lever = #names > 0 and table.concat(names, " + ") or "no flag"
  local cost = #costs > 0 and table.concat(costs, "; ") or "nothing"
  local s = lab.score{ challenge = string.format("challenge %d", n), changes = changes, rank = rank,
                       lever = lever, cost = cost }
  lab.say("Solved in %d change%s with %s%s (%s). The best is %d%s.", changes, changes == 1 and "" or "s", lever,
    place, cost, par, s.new_best and s.before and string.format("; your new best (it was %d)", s.before.changes)
      or (not s.new_best and s.best) and string.format("; your best stays %d (%s)", s.best.changes, s.best.lever)
      or "")
end

return {
  id = 21,
  title = "Playground",
  flags = "*",
  run = function(lab)
    lab.show("memory")
    lab.show("log")
    lab.show("pool")
    lab.show("metrics")
    lab.show("flags")
    lab.autorun(true)
    lab.speed(20)
    lab.on_step(function() watch_headroom(lab) end)
    lab.on_flag(function(name)
      changed[name] = true
      -- every change restarts the server (a crashed one too): a fresh
      -- process, so a fresh allocator for the headroom model
      reset_headroom()
      if name == "request-rate" or name:match("^traffic%-") then apply_traffic(lab) end
      if not lab.running() then
        lab.restart({})
        apply_traffic(lab)
      end
      -- challenge 1's dead end: a max-model-len past the model's own limit
      -- is refused as an argument, not at the length check
      local len, m = tonumber(lab.flag("max-model-len")), lab.model()
      -- (said again after any change while it stands: the gpu alone cannot help then)
      if challenge == 1 and not lab.plan() and len and m and len > m.max_position_embeddings then
        lab.say("vLLM refused max-model-len %s before it sizes the pool: the model's limit is %s tokens. " ..
          "That is not the length check; put max-model-len back and shrink the pool.", fmt.int(len),
          fmt.int(m.max_position_embeddings))
      end
    end)
    local ok, err = restart(lab, { ["request-rate"] = 4, ["traffic-prompt"] = 1500, ["traffic-output"] = 300 })
    if not ok then error("the playground's first server should start: " .. tostring(err)) end
    local cat = lab.catalog()

    lab.page("Playground")
    lab.say("Everything is yours now. The flags view holds every flag kvlab knows: model (any of the " ..
      "%d catalogue models, or the path of a config.json or a folder holding one), gpu (any of the " ..
      "%d cards, or gpu-memory-gib for a card of your own), every vLLM flag of the course, the " ..
      "kv-cache and contiguous switches, and the traffic: request-rate (requests per second), " ..
      "traffic-prompt and traffic-output (tokens per request, varied by half either way).",
      #cat.models, #cat.gpus)
    lab.say("Each change restarts the server, as rerunning vllm serve would, and the engine keeps " ..
      "running while you read. The server you see: %s on %s, %s tokens of KV cache, %s requests " ..
      "per second.", lab.model().id, lab.gpu().name, fmt.int(lab.plan().kv_cache_tokens), lab.flag("request-rate"))
    lab.say("When you are ready, press next for five challenges. Each one starts again from this " ..
      "server, and most ask you to break it in one particular way. To change a flag: f opens the flags " ..
      "view, the arrows pick a flag, Enter edits it, type the value and Enter again, Esc goes back. " ..
      "h gives a hint, then the next one.")
    lab.pause()

    -- 1. The length check
    challenge_page(lab, 1, "the length check")
    restart(lab)
    -- the lever; max-model-len is the one the page says cannot reach it (a
    -- second highlighted row would push the failed start's log off 80x24)
    lab.highlight("flags", "gpu")
    local limit = lab.plan().model_max_model_len
    lab.say("vLLM refuses to start when one request of max-model-len tokens does not fit in the pool. " ..
      "Here the pool holds %s tokens, and max-model-len cannot grow past the model's own %s (vLLM " ..
      "refuses a longer one before it sizes anything). So the request cannot outgrow this pool: " ..
      "shrink the pool instead, with a smaller gpu or a lower gpu-memory-utilization.",
      fmt.int(lab.plan().kv_cache_tokens), fmt.int(limit))
    challenge = 1
    local changes = lab.goal({
      text = "Make vLLM refuse to start at the length check (\"To serve at least one request ...\").",
      check = function() local p = lab.plan(); return p ~= nil and p.error_kind == "max_model_len" end,
      hints = golf_hints(lab, 1, {
        "The pool must be smaller than one max-model-len request, and the request is at most " .. fmt.int(limit) ..
          " tokens: shrink the pool.",
        "Try a smaller card: set gpu to rtx-4090 and leave max-model-len unset.",
      }, 1),
      script = { { "gpu", "rtx-4090" } },
      wrong = { { { "max-model-len", tostring(2 * limit) }, says = "before it sizes the pool" },
                -- a model override is not the server asked about: never scored
                { { "kv-heads", tostring(lab.model().heads) }, says = "Not counted for this goal: --kv-heads" } },
    })
    challenge = 0
    golf_score(lab, 1, changes, 1)
    local p = lab.plan()
    lab.say("There it is:")
    lab.say("%s", fmt.quote(p.error))
    if p.fixes and #p.fixes > 0 then
      local lines = {}
      for i, f in ipairs(p.fixes) do
        local full = f.starts and f.max_model_len >= p.max_model_len
        lines[#lines + 1] = fmt.quote(string.format("%d. %s", i, f.what), 36, "  ", "     ")
        lines[#lines + 1] = fmt.quote(f.flags, 36, "     ", "       ")
        lines[#lines + 1] = fmt.quote(not f.starts and "still fails" or string.format("%s tokens, requests up to %s%s",
          fmt.int(f.kv_cache_tokens), fmt.int(f.max_model_len), full and " (the full length)" or ""), 36, "     ", "     ")
      end
      lab.say("The fixes, cheapest first:")
      lab.say("%s", table.concat(lines, "\n"))
      lab.say("Only a fix that keeps max-model-len at %s serves the model's whole context; the cheaper " ..
        "ones start by lowering it.", fmt.int(p.max_model_len))
    end
    lab.pause()

    -- 2. OOM while profiling
    challenge_page(lab, 2, "OOM while profiling")
    restart(lab)
    lab.highlight("flags", "max-num-batched-tokens")
    lab.highlight("memory", "activation")
    -- where the dummy batch stops fitting beside the weights, from the engine
    local mnbt = lab.plan().max_num_batched_tokens
    local function profile_oom(t) local q = lab.what_if{ ["max-num-batched-tokens"] = t }; return q and q.error_kind == "profile_oom" end
    -- (up to 2^26 tokens: a default of 512, V0's chunked prefill for a
    -- context over 32K, reaches the OOM only past 1024 times itself)
    local hi = mnbt
    while not profile_oom(hi) and hi < (1 << 26) do hi = hi * 2 end
    local lo = hi // 2
    while hi - lo > 1024 do
      local mid = (lo + hi) // 2
      if profile_oom(mid) then hi = mid else lo = mid end
    end
    lab.say("Before the pool exists, vLLM pushes a dummy batch of max-num-batched-tokens tokens " ..
      "through the model to measure the activation peak (%s now, for %s tokens). Its peak grows " ..
      "with the batch: on this card the batch stops fitting beside the weights at about %s tokens, " ..
      "%d times today's. (On the way up the activation reserve eats the pool first, so other " ..
      "errors come before it.)", fmt.gib(lab.plan().activation_gib), fmt.int(mnbt), fmt.int(hi),
      math.floor(hi / mnbt + 0.5))
    changes = lab.goal({
      text = "Make the server run out of memory in the profile run, before the pool is even sized.",
      check = function() local q = lab.plan(); return q ~= nil and q.error_kind == "profile_oom" end,
      hints = golf_hints(lab, 2, {
        "The profile run's peak grows with the number of tokens in the dummy batch.",
        string.format("Set max-num-batched-tokens to %d.", (hi + 8191) // 8192 * 8192),
      }, 1),
      script = { { "max-num-batched-tokens", tostring((hi + 8191) // 8192 * 8192) } },
    })
    golf_score(lab, 2, changes, 1)
    p = lab.plan()
    -- kvlab's summary of the failure, in its own words (PyTorch's error
    -- names only the one allocation that failed, which kvlab cannot know)
    lab.say("vLLM stops in the profile run with PyTorch's out-of-memory error (torch.OutOfMemoryError: " ..
      "CUDA out of memory. Tried to allocate ...). kvlab's account: %s tokens in the dummy batch.",
      fmt.int(p.max_num_batched_tokens))
    lab.say("The weights (%s) plus that batch's activations (%s) do not fit on the card. This is " ..
      "not about the KV cache at all: the fix is a smaller step budget%s. A bigger one only speeds " ..
      "up prefill, and the peak it reserves comes out of the pool.", fmt.gib(p.weights_gib),
      fmt.gib(p.activation_gib), (p.fixes and p.fixes[1]) and (" (kvlab's first fix: " .. p.fixes[1].flags .. ")") or "")
    lab.pause()

    -- 3. OOM after running a while at high utilization
    challenge_page(lab, 3, "OOM after a while")
    restart(lab, { ["request-rate"] = 30, ["traffic-prompt"] = 1500, ["traffic-output"] = 300 })
    lab.highlight("flags", "gpu-memory-utilization")
    -- The most the model's fragmentation reaches under this server's step
    -- budget (one shape per 64 tokens up to max-num-batched-tokens: V0's
    -- 512-token chunked prefill has few), the lowest utilization from 0.95
    -- whose room above the budget it outgrows, and the script's value from
    -- 0.97 up with a fifth to spare (shapes still to be seen).
    local frag_cap = FRAG_SHARE * (1 - math.exp(-(lab.plan().max_num_batched_tokens // 64 + 1) / SHAPES_SCALE))
    local least, util = 95, 97
    while least < 99 and (100 - least) / 100 >= frag_cap do least = least + 1 end
    while util < 99 and (100 - util) / 100 >= 0.8 * frag_cap do util = util + 1 end
    lab.say("Some servers start, serve for a while, then die with CUDA out of memory. vLLM sized the " ..
      "pool correctly; what ran out is the memory above the budget. kvlab models it (it cannot " ..
      "see PyTorch's allocator): fragmentation that grows as batch shapes vary, up to %s of the card, " ..
      "plus short-lived buffers each step such as the logits (requests x %s vocabulary x 4 bytes). " ..
      "Raise gpu-memory-utilization to 0.%d or more, so little is left above the budget, and let " ..
      "the traffic run: the crash comes once it has served a while, not at start-up.",
      fmt.pct(frag_cap), fmt.int(lab.model().vocab_size), least)
    changes = lab.goal({
      text = "Make the server crash with CUDA out of memory after it has been serving for a while.",
      check = function() return state.oom ~= nil and state.oom.util >= 0.95 end,
      hints = golf_hints(lab, 3, {
        "The room above the budget is total x (1 - gpu-memory-utilization).",
        string.format("Set gpu-memory-utilization to 0.%d or more and let the traffic run.", least),
      }, 1),
      script = { { "gpu-memory-utilization", string.format("0.%d", util) } },
      steps = 3000,
    })
    golf_score(lab, 3, changes, 1)
    local o = state.oom
    -- PyTorch's words (c10's CUDA caching allocator), with the figures of kvlab's model
    lab.say("%s", fmt.quote(string.format("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %s. " ..
      "GPU 0 has a total capacity of %s of which %s is free.", fmt.torch_size(o.logits),
      fmt.torch_size(o.total), fmt.torch_size(math.max(0, o.headroom - o.frag)))))
    lab.say("That came after %d step%s of serving. Of the %s left outside the budget, fragmentation " ..
      "held %s by then, and the logits of that step (%s) did not fit in the rest.", o.step,
      o.step == 1 and "" or "s", fmt.gib_of(o.headroom), fmt.gib_of(o.frag), fmt.bytes(o.logits))
    lab.say("At utilization %s only %s of the card is left outside vLLM's budget. Drop it to " ..
      "0.88-0.90. If the model only fits at 0.95, it does not really fit on this GPU.",
      tostring(o.util), fmt.pct(1 - o.util))
    lab.pause()

    -- 4. Works at tp=1, fails at tp=2 (where the release lets it)
    restart(lab)
    -- The utilization at which this release starts the server on one GPU but
    -- not on two, from the engine (none: the release's budget holds at tp 2).
    local break_u, two
    for u = 90, 99 do
      local one = lab.what_if{ ["gpu-memory-utilization"] = u / 100, ["tensor-parallel-size"] = 1 }
      local q = lab.what_if{ ["gpu-memory-utilization"] = u / 100, ["tensor-parallel-size"] = 2 }
      if one and one.starts and q and not q.starts then break_u, two = string.format("%.2f", u / 100), q break end
    end
    -- the title says what this release does at tp 2
    challenge_page(lab, 4, break_u and "fails at tp=2" or "NCCL at tp=2")
    lab.highlight("flags", "tensor-parallel-size")
    lab.highlight("memory", "nccl")
    local at2 = lab.what_if{ ["tensor-parallel-size"] = 2 }
    if break_u then
      lab.say("With tensor-parallel-size 2 every GPU holds half the weights, but it also gets NCCL " ..
        "buffers for the all-reduces (%s per GPU here)%s. Two changes: first raise " ..
        "gpu-memory-utilization to %s while the server still starts on one GPU, then set " ..
        "tensor-parallel-size to 2.", fmt.gib(at2 and at2.nccl_gib or 0),
        lab.release.textbook and ", and vLLM sets them up before it checks free memory" or
        string.format(", which %s keeps outside the budget it sizes", course.release_name(lab)), break_u)
      changes = lab.goal({
        text = "Find flags that start at tensor-parallel-size 1 but fail at 2.",
        check = function()
          local q = lab.plan()
          if not q or q.starts or q.tensor_parallel_size < 2 then return false end
          local one = lab.what_if({ ["tensor-parallel-size"] = 1 })
          return one ~= nil and one.starts
        end,
        hints = golf_hints(lab, 4, {
          "A config sized to the last gigabyte on one GPU has no room for the NCCL buffers.",
          string.format("Set gpu-memory-utilization to %s, check it starts, then set tensor-parallel-size to 2.",
            break_u),
        }, 2),
        script = { { "gpu-memory-utilization", break_u }, { "tensor-parallel-size", "2" } },
      })
      golf_score(lab, 4, changes, 2)
      p = lab.plan()
      lab.say("%s", course.error_text(p))
      if p.error_kind == "free_memory" then
        lab.say("Each GPU had already given %s to NCCL when vLLM checked, so the %s of the card it " ..
          "asked for was no longer free. The same flags at tp=1 start fine.", fmt.gib(p.nccl_gib),
          fmt.pct(p.gpu_memory_utilization))
      else
        lab.say("The %s of NCCL buffers on each GPU, outside the budget vLLM sized, left too little of the " ..
          "%s outside it for what the start-up still had to do. The same flags at tp=1 start fine.",
          fmt.gib(p.nccl_gib), fmt.pct(1 - p.gpu_memory_utilization))
      end
    else
      -- nothing to break: the release counts NCCL inside its budget
      local counted = false
      for _, t in ipairs(at2 and at2.terms or {}) do
        if t.name == "nccl" then counted = t.counted end
      end
      lab.say("With tensor-parallel-size 2 every GPU holds half the weights and gets NCCL buffers for " ..
        "the all-reduces: %s per GPU here. %s %s, and half the weights frees more than that, so at any " ..
        "utilization from 0.90 to 0.99 that starts on one GPU, two start too (the engine tried each). " ..
        "Set tensor-parallel-size to 2 and read the NCCL row in the memory view.",
        fmt.gib(at2 and at2.nccl_gib or 0), course.release_name(lab),
        counted and "takes them off the budget like the weights, before it sizes the cache" or
        "keeps them outside the budget it sizes")
      lab.goal({
        text = "Start the server at tensor-parallel-size 2 and find the NCCL row.",
        check = function() local q = lab.plan(); return q ~= nil and q.starts and q.tensor_parallel_size == 2 end,
        hints = { "Select tensor-parallel-size in the flags view and set it to 2." },
        script = { { "tensor-parallel-size", "2" } },
      })
      p = lab.plan()
      lab.say("At tp 2: %s of NCCL buffers per GPU and a KV pool of %s per GPU. " ..
        "Under the textbook arithmetic (kvlab --accounting textbook) or an older release the same buffers " ..
        "can be what makes tp=2 fail where tp=1 starts.", fmt.gib(p.nccl_gib), fmt.gib(p.kv_cache_gib))
    end
    lab.pause()

    -- 5. A throughput cliff from preemptions
    challenge_page(lab, 5, "throughput cliff")
    -- the traffic is the challenge's, a busy day: the lever is a server flag
    restart(lab, { ["max-model-len"] = 8192, ["request-rate"] = 20, ["traffic-prompt"] = 1500,
      ["traffic-output"] = 300 })
    lab.show("requests")
    lab.highlight("metrics", "num_preemptions")
    -- the lever the page names, in the flags view (f picks it)
    lab.highlight("flags", "gpu-memory-utilization")
    -- the smallest utilization at which this server still starts, from the engine
    local low_u = "0.25"
    for u = 20, 89 do
      local q = lab.what_if{ ["gpu-memory-utilization"] = u / 100 }
      if q and q.starts then low_u = string.format("%.2f", u / 100) break end
    end
    lab.say("No error this time. When the pool is full, the scheduler preempts a running request: " ..
      "it frees its blocks, sends it back to wait, and later computes it again: the GPU redoes old " ..
      "work instead of new. The traffic is set for you: %s requests per second, prompts of about %s " ..
      "tokens and answers of about %s. Today no request is preempted. Break it with a vllm serve flag: " ..
      "lower gpu-memory-utilization a lot (the weights stay, the pool shrinks). (This server caps " ..
      "requests at max-model-len %s, so a small pool still passes the length check. Changing the " ..
      "traffic, or forcing the pool with num-gpu-blocks-override, is not counted.)",
      lab.flag("request-rate"), fmt.int(tonumber(lab.flag("traffic-prompt"))),
      fmt.int(tonumber(lab.flag("traffic-output"))), fmt.int(lab.plan().max_model_len))
    changes = lab.goal({
      text = "Make the server preempt requests under load (watch num_preemptions).",
      check = function() local m = lab.metrics(); return m ~= nil and m.num_preemptions >= 5 end,
      hints = golf_hints(lab, 5, {
        "Fill the pool: a smaller pool, longer requests or more of them.",
        string.format("Lower gpu-memory-utilization to %s.", low_u),
      }, 1),
      script = { { "gpu-memory-utilization", low_u } },
      wrong = { { { "num-gpu-blocks-override", "64" }, says = "Not counted for this goal: --num-gpu-blocks-override" },
                { { "traffic-prompt", "6000" }, says = "Not counted for this goal: --traffic-prompt" } },
      steps = 3000,
    })
    golf_score(lab, 5, changes, 1)
    -- let it serve under pressure a while before reading the figures
    lab.speed(200)
    lab.step(600)
    lab.speed(20)
    local m = lab.metrics()
    lab.say("%s preemptions so far. %s of the %s tokens the GPU computed were recomputes of work it " ..
      "had already done once, and on average %.1f requests were waiting in the queue. vLLM's metrics " ..
      "show it as vllm:num_preemptions_total rising under normal traffic.", fmt.int(m.num_preemptions),
      fmt.int(m.recomputed_tokens), fmt.int(m.computed_tokens), m.mean_num_requests_waiting)
    lab.pause()

    -- The same server (the learner's flags) at one offered load after
    -- another, a fixed stretch of serving each: what is served, what is
    -- recomputed, how long the first token takes.
    lab.page("Where the cliff is")
    local out_mean = tonumber(lab.flag("traffic-output")) or 300
    local rates = { 1, 2, 3, 4, 6, 8, 12, 16 }
    lab.plot{ title = "Output against offered load", xlabel = "offered req/s",
              ylabel = "output tokens/s", series = { "served", "asked" } }
    lab.show("plot"); lab.focus("plot")
    -- the plot is the page's claim: challenge 5's flag gives its rows back (80x24)
    lab.unhighlight("flags")
    lab.on_step(nil)   -- no crash model while measuring
    lab.say("kvlab now runs this server, your flags, at %d offered loads from %g to %g requests per " ..
      "second, %d s of serving each, and plots the output tokens per second it served against what " ..
      "the requests that arrived asked for (about rate x %d tokens: the arrivals and the answers' " ..
      "lengths vary).", #rates, rates[1], rates[#rates], CLIFF_SECONDS, out_mean)
    local rows = { { "req/s", "tok/s", "redone", "TTFT" } }
    local served, redone, asked = {}, {}, {}
    lab.speed(100000)
    for i, r in ipairs(rates) do
      lab.restart{ ["request-rate"] = r }
      apply_traffic(lab)
      lab.run_until(function() return lab.metrics().time_s >= CLIFF_SECONDS end, 200000)
      local mm = lab.metrics()
      served[i] = mm.generation_tokens / mm.time_s
      -- what this run's arrivals asked for (Poisson arrivals, varied
      -- lengths: the nominal rate x mean can be below what was served)
      local want = 0
      for _, q in ipairs(lab.requests()) do want = want + q.output_tokens end
      asked[i] = want / mm.time_s
      redone[i] = mm.computed_tokens > 0 and mm.recomputed_tokens / mm.computed_tokens or 0
      lab.plot_add(1, r, served[i])
      lab.plot_add(2, r, asked[i])
      rows[#rows + 1] = { r, fmt.int(served[i]),
        fmt.pct(redone[i], 1),
        string.format("%.1f s", mm.ttft_mean_s) }
    end
    lab.speed(20)
    lab.restart{ ["request-rate"] = rates[#rates] }
    apply_traffic(lab)
    lab.on_step(function() watch_headroom(lab) end)
    lab.say("%s", fmt.table(rows))
    lab.say("(redone: the share of the tokens computed that were recomputes; TTFT: mean time to the " ..
      "first token.)")
    local knee = rates[#rates]
    for i = 2, #rates do
      if served[i] < 0.9 * asked[i] then knee = rates[i - 1]; break end
    end
    local peak, last = 0, served[#served]
    for _, v in ipairs(served) do peak = math.max(peak, v) end
    -- what the recomputed share did past the knee, as the table shows it
    local at_knee, share_min, share_max = 0, 1, 0
    for i, r in ipairs(rates) do
      if r == knee then at_knee = redone[i] end
      if r >= knee then
        share_min, share_max = math.min(share_min, redone[i]), math.max(share_max, redone[i])
      end
    end
    -- the same one-decimal figures as the table's redone column
    local share = redone[#redone] > at_knee + 0.01
      and string.format("the recomputed share rises (%s to %s)", fmt.pct(at_knee, 1), fmt.pct(redone[#redone], 1))
      or fmt.pct(share_min, 1) == fmt.pct(share_max, 1)
        and string.format("the recomputed share stays at %s", fmt.pct(share_max, 1))
      or string.format("the recomputed share stays between %s and %s", fmt.pct(share_min, 1), fmt.pct(share_max, 1))
    local knee_i = 1
    for i, r in ipairs(rates) do if r == knee then knee_i = i end end
    lab.say("Read it plainly. Up to about %g requests per second the server serves nearly all that is asked " ..
      "(%s of %s tokens per second there). Past that the pool holds only so many requests at once, so the " ..
      "served output flattens at about %s tokens per second, %s, and the first token waits longer and " ..
      "longer as the queue grows without end.", knee, fmt.int(served[knee_i]), fmt.int(asked[knee_i]),
      fmt.int(peak), share)
    if last < 0.9 * peak then
      lab.say("Here the served output even falls, to %s: the recomputes crowd out new work.", fmt.int(last))
    else
      lab.say("The served output does not fall: vLLM's scheduler admits only what the pool holds and " ..
        "preempts the newest request, so the recomputes stay a share, not a collapse. The cliff a user meets is " ..
        "latency: more load buys no more output, only a longer wait.")
    end
    lab.say("The fix is the arithmetic of this course, not a bigger max-num-seqs: more room per " ..
      "token (fp8 KV cache, quantized weights, more GPUs) or less traffic per server.")
    lab.pause()

    -- 6. A bonus: documents that come back after the pool let them go
    lab.page("Bonus challenge: a CPU tier")
    lab.unhighlight()
    lab.on_step(nil)   -- no crash model: this pool is cut by a flag, not by the budget
    restart(lab, { ["max-model-len"] = 8192, ["num-gpu-blocks-override"] = BONUS_POOL })
    if not lab.flag_in_release("kv-offloading-size") then
      lab.say("The bonus needs vLLM's CPU tier, --kv-offloading-size, which vLLM %s does not have (0.11.1 " ..
        "and later do). Pick a newer release to play it.", lab.plan().vllm_version or "?")
    else
      lab.highlight("flags", "kv-offloading-size")
      lab.highlight("metrics", "prefix cache hit rate")
      bonus_traffic(lab)
      lab.say("%d users take turns asking about %d long documents (%s tokens each), but this pool holds " ..
        "only %d blocks, %s tokens: each document is evicted before its next reader comes, and is " ..
        "computed again every time.", BONUS_DOCS, BONUS_DOCS, fmt.int(BONUS_DOC), BONUS_POOL,
        fmt.int(BONUS_POOL * lab.plan().block_size))
      challenge = 6
      changes = lab.goal({
        text = string.format("Make returning readers load their document from host memory (%s tokens of " ..
          "external prefix-cache hits) without touching the pool.", fmt.int(4 * BONUS_DOC)),
        check = function()
          local m = lab.metrics()
          return m ~= nil and m.external_prefix_cache_hits >= 4 * BONUS_DOC and
            lab.flag("num-gpu-blocks-override") == tostring(BONUS_POOL)
        end,
        hints = golf_hints(lab, 6, {
          "vLLM can keep evicted blocks in CPU memory and load them back over PCIe.",
          "Set kv-offloading-size to 16 (GiB of host memory).",
        }, 1),
        script = { { "kv-offloading-size", "16" } },
        steps = 3000,
      })
      challenge = 0
      golf_score(lab, 6, changes, 1)
      local m = lab.metrics()
      lab.say("The tier (%s blocks) took %s blocks out of HBM and loaded %s back: %s tokens the GPU did not " ..
        "compute again (vllm:external_prefix_cache_hits), over the card's PCIe link.",
        fmt.int(m.offload_capacity_blocks), fmt.int(m.offload_stored_blocks), fmt.int(m.offload_loaded_blocks),
        fmt.int(m.external_prefix_cache_hits))
    end
    lab.traffic(nil)
    lab.pause()

    lab.page("Play on")
    lab.unhighlight()
    lab.say("That is the course. The playground stays open: change anything, and when a figure " ..
      "surprises you, find the term of the subtraction that moved.")
    lab.pause()
  end,
}

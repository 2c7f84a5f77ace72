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
local FRAG_SHARE = 0.05
local SHAPES_SCALE = 64 -- distinct batch shapes for fragmentation to reach ~63% of its cap

local state = { shapes = {}, nshapes = 0, oom = nil }

local function reset_headroom()
  state.shapes, state.nshapes, state.oom = {}, 0, nil
end

local function watch_headroom(lab)
  local plan, model, m = lab.plan(), lab.model(), lab.metrics()
  if not plan or not m or m.last_step_tokens == 0 then return end
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
      util = plan.gpu_memory_utilization,
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

local function challenge_page(lab, n, title)
  lab.page(string.format("Challenge %d of 5: %s", n, title))
  lab.unhighlight()
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
      if name == "request-rate" or name:match("^traffic%-") then apply_traffic(lab) end
      -- after a crash the server is stopped: any change starts it again
      if not lab.running() then
        reset_headroom()
        lab.restart({})
        apply_traffic(lab)
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
      "server and asks you to break it in one particular way. To change a flag: f opens the flags " ..
      "view, the arrows pick a flag, Enter edits it, type the value and Enter again, Esc goes back. " ..
      "h gives a hint, then the next one.")
    lab.pause()

    -- 1. The length check
    challenge_page(lab, 1, "the length check")
    restart(lab)
    lab.highlight("flags", "gpu")
    lab.highlight("flags", "max-model-len")
    lab.say("vLLM refuses to start when one request of max-model-len tokens does not fit in the pool. " ..
      "Either shrink the pool (a smaller gpu, or a lower gpu-memory-utilization) or leave the pool " ..
      "and raise max-model-len beyond the %s tokens it holds.", fmt.int(lab.plan().kv_cache_tokens))
    lab.goal({
      text = "Make vLLM refuse to start at the length check (\"To serve at least one request ...\").",
      check = function() local p = lab.plan(); return p ~= nil and p.error_kind == "max_model_len" end,
      hints = {
        "The pool must be smaller than one max-model-len request: shrink the pool or lengthen the request.",
        "Try a smaller card: set gpu to rtx-4090 and leave max-model-len unset.",
      },
      script = { { "gpu", "rtx-4090" } },
    })
    local p = lab.plan()
    lab.say("There it is:\n\n  %s", p.error)
    if p.fixes and #p.fixes > 0 then
      local rows = {}
      for i, f in ipairs(p.fixes) do
        if i > 4 then break end
        rows[#rows + 1] = { f.what, f.flags, f.starts and fmt.int(f.kv_cache_tokens) .. " tokens" or "still fails" }
      end
      lab.say("The fixes, cheapest first:\n\n%s", fmt.table(rows))
    end
    lab.pause()

    -- 2. OOM while profiling
    challenge_page(lab, 2, "out of memory while profiling")
    restart(lab)
    lab.highlight("flags", "max-num-batched-tokens")
    lab.highlight("memory", "activation")
    lab.say("Before the pool exists, vLLM pushes a dummy batch of max-num-batched-tokens tokens " ..
      "through the model to measure the activation peak (%s now). Raise max-num-batched-tokens " ..
      "(%s now) by a factor of ten or more.", fmt.gib(lab.plan().activation_gib),
      fmt.int(lab.plan().max_num_batched_tokens))
    lab.goal({
      text = "Make the server run out of memory in the profile run, before the pool is even sized.",
      check = function() local q = lab.plan(); return q ~= nil and q.error_kind == "profile_oom" end,
      hints = {
        "The profile run's peak grows with the number of tokens in the dummy batch.",
        "Raise max-num-batched-tokens a lot: 262144 does it on this card.",
      },
      script = { { "max-num-batched-tokens", "262144" } },
    })
    p = lab.plan()
    lab.say("%s", p.error)
    lab.say("The weights (%s) plus that batch's activations (%s) do not fit on the card. This is " ..
      "not about the KV cache at all: halve max-num-batched-tokens, and add --enforce-eager if you " ..
      "still need room.", fmt.gib(p.weights_gib), fmt.gib(p.activation_gib))
    lab.pause()

    -- 3. OOM after running a while at high utilization
    challenge_page(lab, 3, "fine at first, out of memory later")
    restart(lab, { ["request-rate"] = 30, ["traffic-prompt"] = 1500, ["traffic-output"] = 300 })
    lab.highlight("flags", "gpu-memory-utilization")
    lab.say("Some servers start, serve for a while, then die with CUDA out of memory. vLLM sized the " ..
      "pool correctly; what ran out is the memory above the budget. kvlab models it (it cannot " ..
      "see PyTorch's allocator): fragmentation that grows as batch shapes vary, up to %s of the card, " ..
      "plus short-lived buffers each step such as the logits (requests x %s vocabulary x 4 bytes). " ..
      "Raise gpu-memory-utilization to 0.95 or more, so little is left above the budget, and let " ..
      "the traffic run: the crash comes after some hundreds of steps.",
      fmt.pct(FRAG_SHARE), fmt.int(lab.model().vocab_size))
    lab.goal({
      text = "Make the server crash with CUDA out of memory after it has been serving for a while.",
      check = function() return state.oom ~= nil and state.oom.util >= 0.95 end,
      hints = {
        "The room above the budget is total x (1 - gpu-memory-utilization).",
        "Set gpu-memory-utilization to 0.95 or more and let the traffic run.",
      },
      script = { { "gpu-memory-utilization", "0.97" } },
      steps = 3000,
    })
    local o = state.oom
    lab.say("  torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %s (logits) after %d " ..
      "steps; %s outside the budget, of which fragmentation took %s.", fmt.bytes(o.logits), o.step,
      fmt.gib_of(o.headroom), fmt.gib_of(o.frag))
    lab.say("At utilization %s only %s of the card is left outside vLLM's budget. Drop it to " ..
      "0.88-0.90. If the model only fits at 0.95, it does not really fit on this GPU.",
      tostring(o.util), fmt.pct(1 - o.util))
    lab.pause()

    -- 4. Works at tp=1, fails at tp=2
    challenge_page(lab, 4, "one GPU works, two do not")
    restart(lab)
    lab.highlight("flags", "tensor-parallel-size")
    lab.highlight("memory", "nccl")
    lab.say("With tensor-parallel-size 2 every GPU holds half the weights, but it also gets NCCL " ..
      "buffers for the all-reduces, and vLLM sets them up before it checks free memory. Two changes: " ..
      "first raise gpu-memory-utilization close to 1 (0.99) while the server still starts on one " ..
      "GPU, then set tensor-parallel-size to 2.")
    lab.goal({
      text = "Find flags that start at tensor-parallel-size 1 but fail at 2.",
      check = function()
        local q = lab.plan()
        if not q or q.starts or q.tensor_parallel_size < 2 then return false end
        local one = lab.what_if({ ["tensor-parallel-size"] = 1 })
        return one ~= nil and one.starts
      end,
      hints = {
        "A config sized to the last gigabyte on one GPU has no room for the NCCL buffers.",
        "Set gpu-memory-utilization to 0.99, check it starts, then set tensor-parallel-size to 2.",
      },
      script = { { "gpu-memory-utilization", "0.99" }, { "tensor-parallel-size", "2" } },
    })
    p = lab.plan()
    lab.say("%s", p.error)
    lab.say("Each GPU had already given %s to NCCL when vLLM checked, so the %s of the card it " ..
      "asked for was no longer free. The same flags at tp=1 start fine.", fmt.gib(p.nccl_gib),
      fmt.pct(p.gpu_memory_utilization))
    lab.pause()

    -- 5. A throughput cliff from preemptions
    challenge_page(lab, 5, "the throughput cliff")
    restart(lab, { ["max-model-len"] = 8192, ["request-rate"] = 4, ["traffic-prompt"] = 1500,
      ["traffic-output"] = 300 })
    lab.show("requests")
    lab.highlight("metrics", "num_preemptions")
    lab.say("No error this time. When the pool is full, the scheduler preempts a running request: " ..
      "it frees its blocks, sends it back to wait, and later computes it again. Throughput falls " ..
      "while the GPU redoes old work. (This server caps requests at max-model-len 8192, so a small " ..
      "pool still passes the length check.) Make the pool small for the traffic: lower " ..
      "gpu-memory-utilization a lot (the weights stay, the pool shrinks) and send more: raise " ..
      "request-rate or traffic-prompt.")
    lab.goal({
      text = "Make the server preempt requests under load (watch num_preemptions).",
      check = function() local m = lab.metrics(); return m ~= nil and m.num_preemptions >= 5 end,
      hints = {
        "Fill the pool: a smaller pool, longer requests or more of them.",
        "Lower gpu-memory-utilization to 0.25 and raise request-rate to 20.",
      },
      script = { { "request-rate", "20" }, { "gpu-memory-utilization", "0.25" } },
      steps = 3000,
    })
    -- let it serve under pressure a while before reading the figures
    lab.speed(200)
    lab.step(600)
    lab.speed(20)
    local m = lab.metrics()
    lab.say("%s preemptions so far. %s of the %s tokens the GPU computed were recomputes of work it " ..
      "had already done once, and %.1f requests waited on average. Each preemption throws away a " ..
      "request's cache and pays for its prefill again; vLLM's metrics show it as " ..
      "vllm:num_preemptions_total rising under normal traffic.", fmt.int(m.num_preemptions),
      fmt.int(m.recomputed_tokens), fmt.int(m.computed_tokens), m.mean_num_requests_waiting)
    lab.say("The fix is the arithmetic of this course, not a bigger max-num-seqs: more room per " ..
      "token (fp8 KV cache, quantized weights, more GPUs) or less traffic per server.")
    lab.pause()

    lab.page("Play on")
    lab.unhighlight()
    lab.say("That is the course. The playground stays open: change anything, and when a figure " ..
      "surprises you, find the term of the subtraction that moved.")
    lab.pause()
  end,
}

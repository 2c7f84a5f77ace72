-- Lesson 1: a coding assistant on one H100 (running example A).
-- The server starts one phase at a time; the memory bar fills to the
-- utilization budget before a single request arrives.
local fmt = require("lib.fmt")
local ask = require("lib.ask")
local expect = require("lib.expect")
local course = require("lib.course")

local PROMPT, OUTPUT = 2000, 64 -- the one request at the end: a file and a question

local function term(plan, name)
  for _, t in ipairs(plan.terms) do
    if t.name == name then return t end
  end
  return { how = "", gib = 0 }
end

-- The start-up log lines of one phase, wrapped to the text view's width and
-- indented so it keeps them as they are.
local function log_lines(lab, phase)
  local out = {}
  for _, l in ipairs(lab.log()) do
    if l.phase == phase then out[#out + 1] = fmt.quote(l.text) end
  end
  return table.concat(out, "\n")
end

-- The phase's log lines on the page, when the release logs any there.
local function say_log(lab, phase)
  local text = log_lines(lab, phase)
  if text ~= "" then lab.say("%s", text) end
end

-- A GiB figure as the table below prints it (two decimals), back as a number.
local function r2(gib)
  return tonumber(string.format("%.2f", gib))
end

return {
  id = 1,
  title = "A coding assistant on one H100",
  flags = {},
  run = function(lab)
    lab.page("A coding assistant on one H100")
    lab.show("memory", { upto = "init" })
    lab.show("log", { upto = "init" })
    local ok, err = course.start(lab, "A")
    if not ok then error("example A should start: " .. tostring(err)) end
    local plan, model, gpu = lab.plan(), lab.model(), lab.gpu()

    lab.say("A developer-tools team runs a coding assistant: %s, with %s weights, behind vLLM on one %s. " ..
      "Later lessons come back to this set-up and call it example A.",
      model.id, model.torch_dtype, gpu.name)
    lab.say("The server is started like this:")
    lab.say("%s", fmt.quote(string.format("vllm serve %s --gpu-memory-utilization %s", model.id,
      tostring(plan.gpu_memory_utilization))))
    lab.say("Before the first request arrives, vLLM decides how much of the card becomes KV cache. " ..
      "It does so in a fixed order of phases. Let us walk through them, watching the memory bar.")
    lab.pause()

    lab.page("1. Load the weights")
    lab.show("memory", { upto = "load" })
    lab.show("log", { upto = "load" })
    lab.highlight("memory", "weights")
    local w = term(plan, "weights")
    lab.say("The worker loads the model: %s (%s). That memory is taken for as long as the server runs.",
      fmt.gib(plan.weights_gib), w.how)
    lab.say("The CUDA context (%s) is already there: it appeared when the worker first touched the GPU.",
      fmt.gib(plan.cuda_context_gib))
    say_log(lab, "load")
    lab.pause()

    lab.page("2. Profile a forward pass")
    lab.unhighlight("memory")
    lab.show("memory", { upto = "profile" })
    lab.show("log", { upto = "profile" })
    lab.highlight("memory", "activation")
    if (plan.forward_gib or 0) > 0 and (plan.sampler_gib or 0) > 0 then
      -- the release's profile: a forward pass, then a sampling step; the larger peak is kept
      local fwd_wins = plan.forward_gib >= plan.sampler_gib
      lab.say("Next vLLM runs a dummy batch of %s tokens (max-num-batched-tokens) through the model " ..
        "(%s at its peak), then a dummy sampling step for %s requests (max-num-seqs) over the whole " ..
        "vocabulary (%s). The activations are freed afterwards, but the larger peak, the %s's, is held " ..
        "back for real batches: %s.", fmt.int(plan.max_num_batched_tokens), fmt.gib(plan.forward_gib),
        fmt.int(plan.max_num_seqs), fmt.gib(plan.sampler_gib), fwd_wins and "forward pass" or "sampler",
        fmt.gib(plan.activation_gib))
    else
      lab.say("Next vLLM runs a dummy batch of %s tokens (max-num-batched-tokens) through the model " ..
        "and records the peak. The activations are freed afterwards, but their space is held back " ..
        "for real batches: %s.", fmt.int(plan.max_num_batched_tokens), fmt.gib(plan.activation_gib))
    end
    local nt = term(plan, "non_torch")
    if nt.gib and nt.gib >= 0.005 then
      lab.say("The same pass measures what grew outside PyTorch's allocator, vLLM's non-torch memory " ..
        "(T in the bar): %s, %s. kvlab's figure for it: %s.", fmt.gib(nt.gib),
        nt.counted and "taken off the budget as well" or "not taken off the budget",
        (nt.how:gsub(" %(measured%)", ", as measured")))
    end
    lab.pause()

    lab.page("3. CUDA graphs")
    lab.unhighlight("memory")
    lab.show("memory", { upto = "cudagraph" })
    lab.show("log", { upto = "cudagraph" })
    lab.highlight("memory", "cudagraph")
    local cg_counted = true
    for _, t in ipairs(plan.terms or {}) do
      if t.name == "cudagraph" then cg_counted = t.counted end
    end
    if cg_counted then
      lab.say("Unless --enforce-eager is given, vLLM estimates what capturing CUDA graphs will cost " ..
        "and holds that back too: %s.", fmt.gib(plan.cudagraph_gib))
    else
      -- 0.18-0.19 measure an estimate and log it, but apply it only with
      -- VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 (v1/worker/gpu_worker.py)
      local estimated = log_lines(lab, "cudagraph"):find("Estimated CUDA graph memory", 1, true)
      lab.say("Unless --enforce-eager is given, vLLM captures CUDA graphs. %s%s captures them after it " ..
        "has sized the pool, so %sit holds nothing back for them: their %s come out of the headroom " ..
        "outside the budget.", estimated and string.format("%s estimates their memory first (the line " ..
        "below) but takes the estimate off the budget only when VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 " ..
        "is set. It", course.release_name(lab)) or course.release_name(lab), "", estimated and "by default " or "",
        fmt.gib(plan.cudagraph_gib))
    end
    say_log(lab, "cudagraph")
    lab.pause()

    lab.page("4. Size the pool")
    lab.unhighlight("memory")
    lab.show("memory", { upto = "kv" })
    lab.show("log", { upto = "kv" })
    lab.highlight("memory", "kv")
    lab.say("Now the subtraction. The budget is what the card reports times the utilization: " ..
      "%s x %s = %s. What the release counts of everything measured so far comes off it:",
      fmt.gib(plan.gpu_total_gib), tostring(plan.gpu_memory_utilization), fmt.gib(plan.budget_gib))
    -- the terms this release takes off the budget; the ones it does not (in parentheses)
    local rows, sum, outside = { { "budget", string.format("%.2f", plan.budget_gib) } }, r2(plan.budget_gib), false
    for _, t in ipairs(plan.terms or {}) do
      if t.name ~= "budget" and t.name ~= "kv_cache" and (t.counted or t.gib > 0) and
         not ((t.name == "nccl" or t.name == "non_torch") and t.gib < 0.005) then
        local label = t.name == "activation" and "activation peak" or course.term_label(t.name)
        if t.counted then
          rows[#rows + 1] = { "- " .. label, string.format("%.2f", t.gib) }
          sum = sum - r2(t.gib)
        else
          rows[#rows + 1] = { "(" .. label .. ")", string.format("(%.2f)", t.gib) }
          outside = true
        end
      end
    end
    rows[#rows + 1] = { "= KV cache (GiB)", string.format("%.2f", plan.kv_cache_gib) }
    lab.say("%s", fmt.table(rows))
    if outside then
      lab.say("In parentheses: used, but not taken off %s's budget (it exists before vLLM measures, " ..
        "or is captured after the pool is sized).", course.release_name(lab))
    end
    if string.format("%.2f", sum) ~= string.format("%.2f", plan.kv_cache_gib) then
      lab.say("(Each figure is rounded to two decimals, so the column works out to %.2f; vLLM subtracts " ..
        "the exact figures and gets %.2f.)", sum, plan.kv_cache_gib)
    end
    say_log(lab, "kv")
    lab.pause()

    lab.page("5. The length check")
    lab.unhighlight("memory")
    lab.show("memory", { upto = "check" })
    lab.show("log", { upto = "check" })
    lab.say("No --max-model-len was given, so vLLM uses the model's own limit: %s tokens. " ..
      "Before going on it checks that one request that long fits in the pool. It needs %s; " ..
      "the pool has %s, so the check passes. (On a smaller card it would not: lesson 7.)",
      fmt.int(plan.max_model_len), fmt.gib(plan.needed_gib), fmt.gib(plan.kv_cache_gib))
    lab.pause()

    lab.page("6. Allocate")
    lab.show("memory", { upto = "ready" })
    lab.show("log", { upto = "ready" })
    lab.show("pool")
    local size_key, size_line, in_tokens = course.pool_line(lab)
    lab.highlight("log", size_key)
    lab.say("The pool is cut into blocks of %d tokens. Each block holds, for every one of the %d layers, " ..
      "the keys and values of %d tokens: %s per token, so %s blocks fit. vLLM allocates them all now, " ..
      "in one go, and prints the pool's size in %s.",
      plan.block_size, plan.num_layers, plan.block_size, fmt.bytes(plan.kv_bytes_per_token),
      fmt.int(plan.num_blocks), in_tokens and "tokens" or "blocks")
    say_log(lab, "allocate")
    -- every term the plan lists, taken off the budget or not (the context,
    -- graphs captured after the pool), and the pool as its blocks take it
    local held = plan.kv_pool_gib
    for _, t in ipairs(plan.terms or {}) do
      if t.name ~= "budget" and t.name ~= "kv_cache" then held = held + t.gib end
    end
    lab.say("Not one request has arrived, yet the process holds %s of the card's %s (%s). " ..
      "nvidia-smi would show the GPU almost full. That is the healthy state: the free memory was " ..
      "turned into capacity on purpose, so nothing else can take it later.",
      fmt.gib(held), fmt.gib(plan.gpu_total_gib), fmt.pct(held / plan.gpu_total_gib, 0))
    lab.pause()

    lab.page("How big is the pool?")
    lab.unhighlight("memory")
    lab.highlight("log", size_key)
    lab.say("The line vLLM printed when it allocated the pool:")
    lab.say("%s", fmt.quote(size_line))
    ask.tokens(lab, {
      prompt = "Read it off the screen: how many tokens of KV cache does this server hold? " ..
        "(Exactly: it is a count.)",
      answer = plan.kv_cache_tokens,
      expect = "num_blocks * block_size",
      block_size = plan.block_size,
      exact = true,
      wrong = { fmt.int(plan.kv_cache_tokens - 1) },
      hints = {
        in_tokens and "The start-up log says it in tokens: look for \"GPU KV cache size\" in the line above."
          or string.format("The start-up log says it in blocks (\"# GPU blocks\" in the line above), of %d " ..
            "tokens each.", plan.block_size),
        string.format("It is num_blocks x block_size: %s blocks of %d tokens.", fmt.int(plan.num_blocks),
          plan.block_size),
      },
      explain = "That number is the server's capacity: every prompt and every generated token of every " ..
          "request in flight has to fit in it at once.",
    })
    lab.pause()

    -- The course outline's whiteboard version of the same sum: its own
    -- premises (decimal gigabytes, a fixed workspace and context, no blocks).
    local GB = 1e9
    local wb = { card = 80 * GB, weights = 16.06 * GB, workspace = 1.5 * GB, context = 1 * GB }
    local wb_budget = plan.gpu_memory_utilization * wb.card
    local wb_kv = wb_budget - wb.weights - wb.workspace - wb.context
    local wb_tokens = math.floor(wb_kv / plan.kv_bytes_per_token)
    expect.near(lab, "the outline's whiteboard pool (tokens)", wb_tokens, 407714, 0)
    local GiB = 2 ^ 30
    -- the rest: every term the accounting in force takes off the budget
    -- besides the weights, so the column adds up (budget - weights - rest = pool)
    local other_names = {}
    for _, t in ipairs(plan.terms or {}) do
      if t.counted and t.gib > 0 and t.name ~= "budget" and t.name ~= "weights" and t.name ~= "kv_cache" then
        other_names[#other_names + 1] = course.term_label(t.name)
      end
    end
    -- exactly what those terms took (the pool is the budget less all of
    -- them), from the figures as shown, so the column adds up as printed
    local function shown(x) return tonumber(string.format("%.2f", x)) end
    local others = shown(plan.budget_gib) - shown(plan.weights_gib) - shown(plan.kv_cache_gib)
    local mine = lab.release.textbook and "textbook" or "vLLM"
    lab.page("Another count you may meet")
    lab.unhighlight("log")
    lab.say("Worked on a whiteboard, this set-up often comes out at about %s tokens, with %.2f GiB " ..
      "in use. It is the same subtraction, done three ways differently:", fmt.int(wb_tokens), wb_budget / GiB)
    lab.say("%s", fmt.table({
      { "(GiB)", mine, "board" },
      { "card", string.format("%.2f", plan.gpu_total_gib), string.format("%.2f", wb.card / GiB) },
      { "budget", string.format("%.2f", plan.budget_gib), string.format("%.2f", wb_budget / GiB) },
      { "weights", string.format("%.2f", plan.weights_gib), string.format("%.2f", wb.weights / GiB) },
      { "the rest", string.format("%.2f", others), string.format("%.2f", (wb.workspace + wb.context) / GiB) },
      { "KV pool", string.format("%.2f", plan.kv_cache_gib), string.format("%.2f", wb_kv / GiB) },
      { "tokens", fmt.int(plan.kv_cache_tokens), fmt.int(wb_tokens) },
    }))
    lab.say("1. The card: the board reads the label, 80 GB, as decimal gigabytes (10^9 bytes), " ..
      "only %.2f GiB. The memory is binary: five 16 GiB HBM stacks, of which the driver reports %s, " ..
      "and vLLM starts from that. %s of 80 GB is 72 GB, %.2f GiB: the board's memory in use.",
      wb.card / GiB, fmt.gib(plan.gpu_total_gib), tostring(plan.gpu_memory_utilization), wb_budget / GiB)
    lab.say("2. The rest: the board subtracts a round 1.5 GB of workspace and 1 GB of context " ..
      "(%.2f GiB); %s subtracts %s (%s).", (wb.workspace + wb.context) / GiB,
      lab.release.textbook and "the textbook" or course.release_name(lab),
      #other_names > 0 and table.concat(other_names, ", "):gsub(", ([^,]*)$", " and %1") or "nothing more",
      fmt.gib(others))
    lab.say("3. Blocks: the board divides and stops; vLLM keeps whole blocks of %d tokens.",
      plan.block_size)
    -- from the table's figures as printed, so the sentence adds up with it
    local card_more = shown(plan.budget_gib) - shown(wb_budget / GiB)
    local rest_more = shown(others) - shown((wb.workspace + wb.context) / GiB)
    local weights_more = shown(plan.weights_gib) - shown(wb.weights / GiB)
    lab.say("So the binary card gives %s %.2f GiB more budget than the board, %sits rest takes %.2f GiB %s: " ..
      "%.2f GiB of pool %s in all. The course follows %s: %s tokens.",
      lab.release.textbook and "the textbook" or "vLLM", card_more,
      math.abs(weights_more) >= 0.005 and string.format("its weights take %.2f GiB %s (a RoPE cache " ..
        "beside the parameters), and ", math.abs(weights_more), weights_more > 0 and "more" or "less") or "and ",
      math.abs(rest_more),
      rest_more >= 0 and "more" or "less", math.abs(shown(plan.kv_cache_gib) - shown(wb_kv / GiB)),
      plan.kv_cache_gib >= wb_kv / GiB and "more" or "less",
      lab.release.textbook and "the textbook" or "vLLM's log", fmt.int(plan.kv_cache_tokens))
    lab.pause()

    course.release_page(lab, fmt, "The same server on a real vLLM")

    lab.page("One request")
    lab.show("requests")
    local id = lab.submit({ prompt_tokens = PROMPT, output_tokens = OUTPUT })
    lab.say("Here is one request: a %s-token prompt (a file and a question) asking for %d tokens. " ..
      "Watch it take blocks from the pool.", fmt.int(PROMPT), OUTPUT)
    local peak = 0
    lab.run_until(function()
      local r = lab.request(id)
      if r and r.num_blocks > peak then peak = r.num_blocks end
      return r == nil or r.state == "finished"
    end, 5000)
    local blocks = lab.blocks()
    -- V1 keeps block 0 as its null block; V0 hands out every block, where
    -- kvlab's engine still holds one back
    local held_back = plan.num_blocks - blocks.usable
    local null_note = held_back > 0 and string.format(" (of the %s, %s %s)", fmt.int(plan.num_blocks),
      held_back == 1 and "one is" or fmt.int(held_back) .. " are",
      plan.engine == "V0" and "held back by kvlab's engine as V1's null block; V0 vLLM hands out every block"
        or "vLLM's null block, never handed out") or ""
    lab.say("At its largest it held %d blocks (room for %s tokens), %s of the %s usable blocks%s. " ..
      "Capacity is about how many such requests can be in flight together: that is what the rest of " ..
      "the course is about.", peak, fmt.int(peak * plan.block_size), fmt.pct(peak / blocks.usable, 2),
      fmt.int(blocks.usable), null_note)
    lab.pause()
  end,
}

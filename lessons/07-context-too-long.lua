-- Lesson 7: break it: a context the cache can't hold.
-- Running example B fails vLLM's length check; the learner makes it start,
-- with the fixes ranked cheapest first.
local fmt = require("lib.fmt")
local expect = require("lib.expect")
local course = require("lib.course")

-- What each fix costs, in the order the engine ranks them.
local COST = {
  ["lower max_model_len"] = "free, unless users need it",
  ["fp8 KV cache"] = "a small accuracy question",
  ["fp8 weights"] = "quality to measure first",
  ["raise utilization (last resort)"] = "eats run-time headroom",
}

-- The flags a fix may touch (the lesson's flags).
local FIX_FLAGS = { "max-model-len", "kv-cache-dtype", "quantization", "tensor-parallel-size",
                    "gpu-memory-utilization" }

local function cost_of(what)
  if COST[what] then return COST[what] end
  if what:find("CUDA graphs") then return "slower decoding, most at small batches" end
  if what:find("4%-bit") then return "a bigger quality question" end
  if what:find("GPUs") then return "another card: costs most" end
  return "see the flag's help"
end

-- The order the page lists the fixes in: by what they cost the service
-- (the engine tries the levers that change its measured terms first).
local function cost_rank(what)
  local order = { "lower max_model_len", "fp8 KV cache", "CUDA graphs", "fp8 weights", "4%-bit", "GPUs",
                  "utilization" }
  for i, w in ipairs(order) do
    if what:find(w) then return i end
  end
  return #order + 1
end

local function by_cost(fixes)
  local t = {}
  for i, f in ipairs(fixes or {}) do t[#t + 1] = { f = f, i = i } end
  table.sort(t, function(a, b)
    local ra, rb = cost_rank(a.f.what), cost_rank(b.f.what)
    if ra ~= rb then return ra < rb end
    return a.i < b.i
  end)
  local out = {}
  for _, e in ipairs(t) do out[#out + 1] = e.f end
  return out
end

-- How the release's error gives the tokens the pool holds: V1's estimate
-- of the longest max_model_len, V0's count of what the cache can store, or
-- (0.8.x) a sentence that begins to give the estimate and drops the figure.
local function said_as(lab, err)
  if err:find("estimated maximum model length", 1, true) then
    return "and vLLM prints that as the estimated maximum length"
  elseif err:find("maximum number of tokens that can be stored", 1, true) then
    return "and vLLM prints that as the most tokens the KV cache can store"
  elseif err:find("Based on the available memory,", 1, true) then
    return string.format("which %s's error means to give as the estimated maximum length, but its message " ..
                         "drops the figure after 'Based on the available memory,'", course.release_name(lab))
  end
  return "a figure this release's error does not print"
end

return {
  id = 7,
  title = "Break it: a context the cache can't hold",
  flags = { "max-model-len", "kv-cache-dtype", "quantization", "tensor-parallel-size",
            "gpu-memory-utilization" },
  run = function(lab)
    -- Running example B: an RTX 4090 (23.64 GiB; 23.5 in the textbook), no --max-model-len.
    local ok = course.start(lab, "B")
    local p = lab.plan()
    local m = lab.model()
    local start = {}
    for _, f in ipairs(FIX_FLAGS) do start[f] = lab.flag(f) end
    expect.holds(lab, "example B fails the length check", not ok and p.error_kind == "max_model_len")
    expect.near(lab, "example B: KV needed for one max-length request (GiB)", p.needed_gib, 16.0, 0.005)
    expect.seed(lab, "example B: available KV cache memory (GiB)", p.kv_cache_gib, 2.83, 0.01)
    expect.between(lab, "example B: estimated maximum model length", p.estimated_max_model_len, 22000, 24000, true)

    lab.page("The server will not start")
    lab.say("A new set-up, which later lessons come back to as example B: %s on an RTX 4090 that reports " ..
            "%.2f GiB, utilization %.2f, --max-num-batched-tokens %s and no --max-model-len. vLLM stops " ..
            "during start-up with the error at the end of the log.",
            m.id, p.gpu_total_gib, p.gpu_memory_utilization, fmt.int(p.max_num_batched_tokens))
    lab.show("log")
    lab.highlight("log", "To serve at least one request")
    -- the error whole, even at 80x24 (kvlab check's page rule); the memory
    -- bar takes the rows left, or Tab, and is pointed at on the next page
    lab.focus("log")
    lab.show("memory")
    lab.say("Read it from the end. Without --max-model-len vLLM takes the model's own limit, %s " ..
            "tokens (max_position_embeddings in config.json). It then insists that one request of " ..
            "that length fit in the pool: %s tokens x %s = %.1f GiB. The pool is %.2f GiB, which " ..
            "holds about %s tokens, %s.",
            fmt.int(p.max_model_len), fmt.int(p.max_model_len), fmt.bytes(p.kv_bytes_per_token),
            p.needed_gib, p.kv_cache_gib, fmt.int(p.estimated_max_model_len), said_as(lab, p.error or ""))
    lab.say("max-model-len is a limit on one request; the pool is shared by all of them. The check " ..
            "is only about the first: a server that cannot hold even one full-length request refuses " ..
            "to start.")
    lab.pause()

    lab.page("Fixes, cheapest first")
    lab.unhighlight("log")
    lab.focus("memory")
    lab.highlight("memory", "kv", nil, string.format("%.2f GiB", p.kv_cache_gib))
    lab.say("kvlab tried each fix on the engine. In the order you should reach for them:")
    local lines = {}
    for i, f in ipairs(by_cost(p.fixes)) do
      local result = f.starts and string.format("starts: %s tokens", fmt.int(f.kv_cache_tokens))
                     or string.format("still fails (pool %.2f GiB)", f.kv_cache_gib)
      lines[#lines + 1] = fmt.quote(string.format("%d. %s", i, f.what), 36, "  ", "     ")
      lines[#lines + 1] = fmt.quote(f.flags, 36, "     ", "       ")
      lines[#lines + 1] = fmt.quote(result .. "; cost: " .. cost_of(f.what), 36, "     ", "     ")
    end
    lab.say(table.concat(lines, "\n"))
    local util_fix = false
    for _, f in ipairs(p.fixes or {}) do
      if f.flags:find("utilization") then util_fix = true end
    end
    if not util_fix then
      lab.say("Missing from the list: gpu-memory-utilization. kvlab tried every value up to 0.99 and " ..
              "none makes this server start.")
    end
    lab.say("Raising gpu-memory-utilization belongs at the very end: it takes memory vLLM needs for " ..
            "fragmentation and short-lived buffers once traffic arrives, so a server that only starts " ..
            "at 0.95 tends to fall over later.")
    lab.pause()

    lab.page("Make it start")
    lab.say("Change one flag at a time in the flags view: press f, pick a flag with Up/Down, then " ..
            "type a number and Enter, or step through its choices with Left/Right. Every change " ..
            "reruns the start-up and says here what happened. The list of fixes is one page back (p).")
    lab.show("flags")

    -- One report per page, so the newest is never below the fold.
    lab.on_flag(function(name, value)
      local q = lab.plan()
      lab.page("Make it start")
      if not q then
        -- refused as an argument, before any plan (vLLM's own check)
        local ckpt = course.checkpoint_quant(lab)
        lab.say("--%s %s: refused before start-up.%s", name, value == "" and "(default)" or value,
                ckpt and (" " .. ckpt) or "")
        lab.say("Change another flag (f), or go back (p) to the fixes.")
        return
      end
      if q.starts then
        lab.say("--%s %s: it starts, with %s tokens of cache (room for %s).",
                name, value == "" and "(default)" or value, fmt.int(q.kv_cache_tokens),
                fmt.room(q.max_concurrency, q.max_model_len))
      elseif q.error_kind == "max_model_len" then
        -- as many digits as it takes for the need to read larger than the pool
        local digits = 2
        while digits < 5 and tonumber(string.format("%." .. digits .. "f", q.needed_gib)) <=
            tonumber(string.format("%." .. digits .. "f", q.kv_cache_gib)) do
          digits = digits + 1
        end
        lab.say("--%s %s: still refused. One %s-token request needs %." .. digits .. "f GiB; the pool has only %." ..
                digits .. "f GiB.", name, value == "" and "(default)" or value, fmt.int(q.max_model_len), q.needed_gib,
                q.kv_cache_gib)
      else
        lab.say("--%s %s: refused: %s", name, value == "" and "(default)" or value, course.error_text(q))
      end
      -- the levers this lesson warns against, each with its reason
      local tp = tonumber(lab.flag("tensor-parallel-size")) or 1
      local util = tonumber(lab.flag("gpu-memory-utilization")) or p.gpu_memory_utilization
      if tp > 1 then
        lab.say("That is a second GPU: the costliest fix on the list, for a server that only needs a " ..
                "shorter limit or smaller numbers. Set tensor-parallel-size back to 1 and try a fix " ..
                "from the top of the list.")
      end
      if util > p.gpu_memory_utilization + 1e-9 then
        lab.say("Utilization above %.2f is the last resort: it takes the memory vLLM needs for " ..
                "fragmentation and short-lived buffers once traffic arrives. Put it back to %.2f.",
                p.gpu_memory_utilization, p.gpu_memory_utilization)
      end
      local ckpt = course.checkpoint_quant(lab)
      if ckpt then lab.say("%s", ckpt) end
      lab.say("Change another flag (f), or go back (p) to the fixes.")
    end)
    -- Met by a fix that keeps one GPU and the utilization: the cheap end of the list.
    local function cheap()
      local tp = tonumber(lab.flag("tensor-parallel-size")) or 1
      local util = tonumber(lab.flag("gpu-memory-utilization")) or p.gpu_memory_utilization
      return tp == 1 and util <= p.gpu_memory_utilization + 1e-9 and not course.checkpoint_quant(lab)
    end
    lab.goal{
      text = "Make the server start with a cheap fix: one GPU, utilization left as it is.",
      check = function() return lab.running() and cheap() end,
      wrong = { { { "tensor-parallel-size", "2" }, says = "costliest fix" },
                { { "quantization", "awq" }, says = "Not counted: --quantization awq needs an AWQ checkpoint" } },
      hints = {
        "The error names the length it used. Which flag sets that length?",
        string.format("Set max-model-len to %s or less (8192 is a common choice).",
                      fmt.int(p.estimated_max_model_len)),
      },
      script = { { "max-model-len", "8192" } },
    }

    local q = lab.plan()
    lab.page("It starts")
    lab.say("The server is up: %.2f GiB of cache, %s tokens, room for %s at once " ..
            "(the ratio is the log's 'Maximum concurrency').", q.kv_cache_gib, fmt.int(q.kv_cache_tokens),
            fmt.room(q.max_concurrency, q.max_model_len))
    lab.show("log", { upto = "ready" })
    lab.highlight("log", "Maximum concurrency")
    -- Every flag the learner left changed, not just the last one: an fp8
    -- cache switched on during an earlier try still shapes this pool.
    local changed = {}
    for _, f in ipairs(FIX_FLAGS) do
      local v = lab.flag(f)
      if v ~= start[f] and not (tonumber(v) and tonumber(v) == tonumber(start[f])) then
        changed[#changed + 1] = string.format("--%s %s", f, v)
      end
    end
    if #changed > 0 then
      lab.say("Flags in effect, besides the starting command: %s.%s", table.concat(changed, ", "),
              #changed > 1 and " Each of them shapes the figures above, not only the last one you changed." or "")
    end
    if start["kv-cache-dtype"] ~= lab.flag("kv-cache-dtype") and q.kv_cache_dtype:find("fp8") then
      lab.say("The fp8 KV cache is still on from an earlier try: it stores each value in %d byte " ..
              "instead of %d, so this pool holds %s times the tokens it would otherwise.", q.kv_dtype_bytes,
              p.kv_dtype_bytes, fmt.int(p.kv_dtype_bytes / q.kv_dtype_bytes))
    end
    if q.gpu_memory_utilization > p.gpu_memory_utilization then
      lab.say("You got there with a higher utilization. It works on the screen; in production leave " ..
              "it near the default and use one of the cheaper fixes.")
    end
    lab.say("Starting is not the same as serving well: a handful of requests at once is not much of " ..
            "a server. Lesson 9 turns this pool into a number of users.")
    lab.pause()
  end,
}

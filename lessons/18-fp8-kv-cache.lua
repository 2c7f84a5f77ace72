-- Lesson 18: an fp8 KV cache halves the bytes per token; then the next limit shows.
local fmt = require("lib.fmt")
local W = require("lib.workload")
local course = require("lib.course")

local DOCS = { prompt = { 3000, 3600 }, output = { 300, 500 } }
local NREQ = 40

-- Example B at 8K, at most eight requests at once.
local BASE = course.example("B", { ["max-model-len"] = 8192, ["max-num-seqs"] = 8 })

local LIMITS = {
  "the KV cache: it is full",
  "max-num-seqs: the running cap",
  "max-num-batched-tokens",
}

-- Send the documents and let the server settle into its steady state.
local function load_server(lab)
  W.submit(lab, NREQ, DOCS)
  lab.step(40)
  return { m = lab.metrics(), p = lab.plan() }
end

-- A document at its longest: prompt and answer.
local DOC_MAX = DOCS.prompt[2] + DOCS.output[2]

-- The running cap that makes the bf16 cache the limit: the smallest
-- multiple of 4 (8 or more) that lets 1.4x as many documents run as the
-- pool holds at their longest, read from the engine (8 on the textbook's
-- 23,184 tokens; more where the release's pool is bigger, and in vLLM 0.2x
-- on the cap itself moves the pool a little).
local function cache_bound_seqs(lab)
  for s = 8, 256, 4 do
    local q = lab.what_if{ ["max-num-seqs"] = s }
    if q and q.starts and s >= 1.4 * q.kv_cache_tokens / DOC_MAX then return s end
  end
  return 8
end

local function binding(s)
  local m, p = s.m, s.p
  -- the cache: nearly full, or too full for the next waiting document while
  -- the running cap still has room
  if m.kv_cache_usage_perc >= 0.9 then return 1 end
  if m.num_requests_waiting > 0 and m.num_requests_running < p.max_num_seqs and
     (1 - m.kv_cache_usage_perc) * p.kv_cache_tokens < DOCS.prompt[2] then return 1 end
  if m.num_requests_running >= p.max_num_seqs then return 2 end
  return 3
end

return {
  id = 18,
  title = "Half the bytes per token",
  flags = { "kv-cache-dtype", "max-num-seqs" },
  run = function(lab)
    lab.speed(60)
    lab.page("A cache-bound server")
    local ok, err = lab.start(BASE)
    if not ok then error("the lesson's server did not start: " .. tostring(err)) end
    local seqs = cache_bound_seqs(lab)
    if seqs ~= tonumber(lab.flag("max-num-seqs")) then ok, err = lab.restart{ ["max-num-seqs"] = seqs } end
    course.note(lab, "B")
    if not ok then error("the lesson's server did not start: " .. tostring(err)) end
    lab.show("memory"); lab.show("metrics"); lab.show("flags")
    local a = load_server(lab)
    if binding(a) ~= 1 then error("the bf16 server is not cache-bound") end
    lab.say("Example B serving long documents, at most %d at once (--max-num-seqs): %d running, %d "
      .. "waiting, KV usage %s. The cache holds %s tokens at %s per token, and it is the limit.",
      a.p.max_num_seqs, a.m.num_requests_running, a.m.num_requests_waiting, fmt.pct(a.m.kv_cache_usage_perc),
      fmt.int(a.p.kv_cache_tokens), fmt.bytes(a.p.kv_bytes_per_token))
    lab.say("--kv-cache-dtype fp8 stores each key and value in one byte instead of two. "
      .. "It is separate from the weights' precision: the model still computes in bf16.")
    lab.ask{
      prompt = "How many bytes will one token of KV take in fp8?",
      answer = a.p.kv_bytes_per_token / 2, unit = "bytes", tolerance = 0.01,
      expect = "plan_with{ ['kv-cache-dtype'] = 'fp8' }.kv_bytes_per_token",
      near = { { value = a.p.kv_bytes_per_token / 4, why = "fp8 is one byte per value instead of two: half, not a quarter." } },
      hints = { "Bytes per value go from 2 to 1; nothing else in the formula changes." },
    }

    lab.page("Switch the cache to fp8")
    lab.say("Switch the cache to fp8 and the same %d documents are sent again.", NREQ)
    lab.highlight("flags", "kv-cache-dtype")
    lab.goal{
      text = "Set kv-cache-dtype to fp8.",
      check = function() return lab.running() and lab.plan().kv_bytes_per_token * 2 == a.p.kv_bytes_per_token end,
      hints = { "Select kv-cache-dtype in the flags view and choose fp8." },
      script = { { "kv-cache-dtype", "fp8" } },
    }
    lab.unhighlight()
    local b
    lab.predict{
      prompt = string.format("The KV usage was %s in bf16. Before the %d documents run again on the fp8 "
        .. "cache: what will the usage be?", fmt.pct(a.m.kv_cache_usage_perc), NREQ),
      unit = "%", abs = 3, script = "50%",
      expect = "metrics.kv_cache_usage_perc * 100",
      run = function()
        b = load_server(lab)
        return b.m.kv_cache_usage_perc * 100
      end,
      why = "Half the bytes per token is not half the usage: with room for more, more documents run, "
        .. "each with its own cache, until something else stops them.",
    }
    lab.say("The server restarted with an fp8 cache and the documents are running again. "
      .. "Read its start-up log or the memory view.")
    local doc = DOCS.prompt[2]
    local function mib(v) return string.format("%.0f MiB", v / 2 ^ 20) end
    -- the explanation heads the next page (the app keeps a right answer's
    -- explanation on top when the lesson moves on at once)
    lab.ask{
      prompt = "How many tokens does the pool hold now?",
      answer = b.p.kv_cache_tokens, unit = "tokens", tolerance = 0.01,
      expect = "num_blocks * block_size",
      near = { { value = a.p.kv_cache_tokens, why = "That was the bf16 pool. Read the new start-up line." } },
      hints = { "The log's 'GPU KV cache size' line, or the memory view." },
      explain = string.format("The pool went from %s to %s tokens in the same %.2f GiB: room for %s "
        .. "instead of %s. Each decode step also reads every cached token of every "
        .. "running request, so a %s-token document now costs %s to read per step instead of %s.",
        fmt.int(a.p.kv_cache_tokens), fmt.int(b.p.kv_cache_tokens), b.p.kv_cache_gib, fmt.room(b.p.max_concurrency, b.p.max_model_len),
        fmt.room(a.p.max_concurrency), fmt.int(doc), mib(doc * b.p.kv_bytes_per_token),
        mib(doc * a.p.kv_bytes_per_token)),
    }
    lab.page("The next limit")
    lab.highlight("metrics", "num_requests_running"); lab.highlight("metrics", "kv_cache_usage_perc")
    lab.say("Now %d run, %d wait, and KV usage is %s.", b.m.num_requests_running,
      b.m.num_requests_waiting, fmt.pct(b.m.kv_cache_usage_perc))
    local lim = binding(b)
    lab.ask{
      prompt = "What limits this server now?",
      choices = LIMITS, correct = lim,
      why = { [1] = "Look at the usage: is the cache still full?",
              [2] = "Compare the running count with max-num-seqs.",
              [3] = "The budget caps tokens per step, not requests in flight." },
      hints = { "Compare num_requests_running with the max-num-seqs flag, and the usage with 100%." },
    }
    local where = {
      "here it did not move far enough: the cache is still full",
      "here the scheduler's cap",
      "here the token budget per step",
    }
    local fit = b.p.kv_cache_tokens // DOC_MAX
    if lim == 1 then
      lab.say("Halving the bytes per token bought room, but not enough: %s. Fixing one bottleneck "
        .. "only shows you the next once it is really fixed.", where[lim])
    else
      lab.say("Halving the bytes per token bought room, and the limit moved somewhere else: %s. "
        .. "Raise that and the cache is the limit again first: the fp8 pool holds about %d documents "
        .. "at their longest (%s tokens / %s). Each step's time, whatever the limit, is set by the GPU "
        .. "reading all %.2f GiB of weights plus the running documents' cache. Fixing one bottleneck "
        .. "always shows you the next.", where[lim], fit, fmt.int(b.p.kv_cache_tokens), fmt.int(DOC_MAX),
        b.p.weights_gib)
    end
    lab.pause()
  end,
}

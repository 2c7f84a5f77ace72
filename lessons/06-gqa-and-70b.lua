-- Lesson 6: why GQA made 70B practical.
-- 70B at tp=4 with its 8 KV heads against a hypothetical 64; then tensor
-- parallelism past the number of KV heads, where heads are copied.
local fmt = require("lib.fmt")
local expect = require("lib.expect")
local heads = require("lib.heads")
local course = require("lib.course")

local MODEL = "meta-llama/Llama-3.1-70B-Instruct"
local LEN = 8192
local TP = 4

return {
  id = 6,
  title = "Why GQA made 70B practical",
  flags = { "tensor-parallel-size", "kv-heads" },
  run = function(lab)
    local ok, err = lab.start(course.server{ model = MODEL, gpu = "h100-80gb", ["gpu-memory-utilization"] = 0.9,
                               ["max-model-len"] = LEN, ["tensor-parallel-size"] = TP })
    assert(ok, err)
    local m = lab.model()
    local gqa = lab.plan()
    lab.restart{ ["kv-heads"] = m.heads }
    local mha = lab.plan()
    lab.restart{ ["kv-heads"] = "" }

    local n_gqa, n_mha = math.floor(gqa.max_concurrency), math.floor(mha.max_concurrency)
    lab.page("70B on four GPUs")
    -- why four cards: what two would do, from the engine
    local at2 = lab.what_if{ ["tensor-parallel-size"] = TP // 2 }
    local why4, two = nil, ({ [2] = "two", [1] = "one" })[TP // 2] or tostring(TP // 2)
    if at2 and at2.starts then
      why4 = string.format("%s H100s can serve it with %s tokens of cache each; %s leave room for more",
                           two, fmt.int(at2.kv_cache_tokens), ({ [4] = "four" })[TP] or tostring(TP))
    elseif at2 and (at2.error_kind == "weights_oom" or at2.error_kind == "free_memory") then
      why4 = string.format("its weights do not fit on %s H100s", two)
    else
      why4 = string.format("%s H100s hold its weights (%s each) but leave no room for the KV cache",
                           two, fmt.gib(at2 and at2.weights_gib or 0))
    end
    lab.say("%s has %d layers, %d query heads and %d KV heads (from its config.json). In bf16, %s. " ..
            "With --tensor-parallel-size %d each card holds a quarter of " ..
            "the weights and a quarter of every token's K/V.", m.id, m.layers, m.heads, m.kv_heads, why4, TP)
    lab.say("Now imagine the same model trained with one K/V pair per query head (MHA). kvlab " ..
            "started both on the same four cards, weights unchanged, requests of %s tokens:", fmt.int(LEN))
    lab.say(fmt.table{
      { "", "KV", "per token", "at once" },
      { "GQA", m.kv_heads, fmt.bytes(gqa.kv_bytes_per_token), n_gqa },
      { "MHA", m.heads, fmt.bytes(mha.kv_bytes_per_token), n_mha },
    })
    lab.say("(GQA: the real model; MHA: the what-if. KV: KV heads in the whole model; per token: KV bytes per token on each GPU; at once: " ..
            "whole %s-token conversations the %d GPUs hold together. The pool is %.2f GiB per GPU in both.)",
            fmt.int(LEN), TP, gqa.kv_cache_gib)
    lab.say("Same cards, same weights, same pool: %d conversations against %d. GQA is what turns " ..
            "a 70B model on one node from a demo into a service.", n_gqa, n_mha)
    -- the course outline's round figures (6 and 48), reconciled with this pool
    local OUTLINE_GQA, OUTLINE_MHA = 48, 6
    if n_gqa ~= OUTLINE_GQA or n_mha ~= OUTLINE_MHA then
      lab.say("The course outline says %d against %d: the same 8x, for a pool of %.2f GiB per GPU (%d x %s " ..
              "tokens x %s). This server's pool is %.2f GiB per GPU (%s), hence %d.", OUTLINE_MHA, OUTLINE_GQA,
              OUTLINE_GQA * LEN * gqa.kv_bytes_per_token / 2 ^ 30, OUTLINE_GQA, fmt.int(LEN),
              fmt.bytes(gqa.kv_bytes_per_token), gqa.kv_cache_gib, course.release_name(lab), n_gqa)
    end
    expect.between(lab, "70B tp=4 8K conversations, 8 KV heads", n_gqa, 45, 60)
    expect.between(lab, "70B tp=4 8K conversations, 64 KV heads", n_mha, 5, 7)
    expect.near(lab, "GQA / MHA conversations ratio", gqa.max_concurrency / mha.max_concurrency, 8, 0.02)
    lab.pause()

    lab.page("Heads split across ranks")
    lab.say("Tensor parallelism hands each GPU a share of the heads. With %d KV heads and %d ranks, " ..
            "each rank caches %d of them for every token, so its KV per token is a quarter of the " ..
            "model's:", m.kv_heads, TP, gqa.kv_heads_per_gpu)
    lab.say(heads.ranks(lab.ranks()))
    lab.show("tp")
    lab.focus("tp")
    -- conversations arriving, so each rank's pool fills as the learner reads
    lab.traffic{ rate = 4, prompt_tokens = { min = 2000, max = 6000 }, output_tokens = { min = 200, max = 600 },
                 seed = 6 }
    lab.autorun(true)
    local ids = {}
    for i = 0, TP - 1 do ids[#ids + 1] = i end
    lab.highlight("tp", "rank", ids, string.format("%d KV heads each", gqa.kv_heads_per_gpu))
    lab.pause()

    -- Sweep tp over the values that divide the query heads, on the engine,
    -- to find where KV per GPU stops shrinking.
    local sweep = {}
    local tp = 1
    while tp <= m.heads and tp <= 16 do
      lab.restart{ ["tensor-parallel-size"] = tp }
      local p = lab.plan()
      sweep[#sweep + 1] = { tp = tp, bpt = p.kv_bytes_per_token, heads = p.kv_heads_per_gpu,
                            starts = p.starts, tokens = p.kv_cache_tokens, conc = p.max_concurrency }
      tp = tp * 2
    end
    local last = sweep[#sweep].tp
    for i = 2, #sweep do
      if sweep[i].bpt == sweep[i - 1].bpt then last = sweep[i - 1].tp; break end
    end
    lab.restart{ ["tensor-parallel-size"] = TP }

    lab.page("More GPUs than KV heads")
    lab.say("Keep adding GPUs and the query heads keep splitting: there are %d of them. The KV heads " ..
            "run out sooner. A rank cannot hold half a head, so once there are more ranks than KV " ..
            "heads vLLM gives every rank a whole copy of one (max(1, KV heads / tp)).", m.heads)
    lab.say("Change tensor-parallel-size in the flags view (f; try 8, then 16) and watch the KV " ..
            "heads per rank in the tp view. Each change is reported here.")
    lab.on_flag(function()
      local q = lab.plan()
      if q and q.kv_bytes_per_token then
        lab.say("tp=%d: %d KV head%s per GPU, %s per token per GPU.", q.tensor_parallel_size,
                q.kv_heads_per_gpu, q.kv_heads_per_gpu == 1 and "" or "s", fmt.bytes(q.kv_bytes_per_token))
      end
    end)
    local tp_explain = string.format("At tp=%d each GPU holds max(1, %d / %d) = %d KV head; from there " ..
                                     "on, more GPUs only copy heads.", last, m.kv_heads, last,
                                     math.max(1, m.kv_heads // last))
    lab.ask{
      prompt = "What is the largest tensor-parallel-size that still shrinks each GPU's KV per token?",
      answer = last,
      expect = "model.kv_heads",
      unit = "",
      abs = 0.01,
      near = {
        { value = last * 2, why = string.format("At %d every GPU already holds the same KV per token as at %d: " ..
                                                "the shrinking had stopped one step earlier.", last * 2, last) },
        { value = m.heads, why = string.format("%d is the number of query heads. Queries are not cached; the " ..
                                               "split that matters is over the %d KV heads.", m.heads, m.kv_heads) },
      },
      hints = {
        "KV heads per GPU = max(1, KV heads / tp). When does the division stop giving fewer?",
        string.format("The model has %d KV heads.", m.kv_heads),
      },
      script = "8",
      wrong = { "16", "64", "4" },
      explain = tp_explain,
    }
    -- a fresh page for the table; the app heads it with the answer just given
    lab.page("Every tp, side by side")
    local rows = { { "tp", "KV", "per token", "tokens" } }
    for _, s in ipairs(sweep) do
      rows[#rows + 1] = { s.tp, s.heads, fmt.bytes(s.bpt), s.starts and fmt.int(s.tokens) or "won't start" }
    end
    lab.say(fmt.table(rows))
    lab.say("(Per GPU: KV heads, KV bytes per token, pool in tokens.)")
    local s8, s16
    for _, s in ipairs(sweep) do
      if s.tp == last then s8 = s elseif s.tp == last * 2 then s16 = s end
    end
    if s8 and s16 then
      expect.near(lab, "70B KV/token per GPU at tp=16 equals tp=8", s16.bpt, s8.bpt, 0)
      expect.near(lab, "70B KV/token per GPU at tp=8", s8.bpt, 40960, 0)
      lab.say("From %d to %d GPUs each card's KV per token stays at %s. The pool per card still grows " ..
              "(each holds less weight), but only by what the weights give back.",
              s8.tp, s16.tp, fmt.bytes(s8.bpt))
      lab.restart{ ["tensor-parallel-size"] = s16.tp }
      local rep = {}
      for _, r in ipairs(lab.ranks()) do
        if r.replicated and #rep < 2 then rep[#rep + 1] = r.rank end
      end
      lab.highlight("tp", "rank", rep, "same KV head copied")
    end
    lab.pause()
  end,
}

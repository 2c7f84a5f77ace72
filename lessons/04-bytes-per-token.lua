-- Lesson 4: the formula on the whiteboard.
-- Bytes of K/V per token, from the fields of the model's real config.json.
local fmt = require("lib.fmt")
local expect = require("lib.expect")
local course = require("lib.course")


-- The fields the sum needs, as the file has them.
local function field_rows(cfg)
  local rows = {}
  for _, k in ipairs({ "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size",
                       "head_dim", "torch_dtype" }) do
    rows[#rows + 1] = { k, cfg[k] ~= nil and tostring(cfg[k]) or "(absent)" }
  end
  return rows
end

-- The catalogue path from "models/" on, short enough for the text view.
local function short_path(path)
  return path:match("(models/.*)$") or path
end

-- "2 x 32 layers x 8 KV heads x 128 head_dim x 2 bytes = 131,072 bytes" for
-- the running server, from the plan's own factors.
local function formula(lab)
  local p = lab.plan()
  local layers, kvh, hs = p.num_layers, p.kv_heads_per_gpu, p.head_size
  local dt = p.kv_cache_dtype or ""
  local vb = dt:find("fp8") and 1 or (dt:find("32") and 4 or 2)
  local factor = p.kv_bytes_per_token / (layers * kvh * hs * vb)
  if factor ~= 1 and factor ~= 2 then
    return string.format("  %s bytes per token (%s)", fmt.int(p.kv_bytes_per_token), fmt.bytes(p.kv_bytes_per_token))
  end
  return string.format("  %d x %d layers x %d KV heads\n    x %d head_dim x %d byte%s\n  = %s bytes (%s)",
    factor, layers, kvh, hs, vb, vb > 1 and "s" or "", fmt.int(p.kv_bytes_per_token),
    fmt.bytes(p.kv_bytes_per_token))
end

-- The pool the running server sized, in tokens, and for a model with
-- sliding-window layers why its log line counts a little less: one set of
-- figures for the memory view, the log and the pool view, on one page.
local function pool_report(lab)
  local p, b = lab.plan(), lab.blocks()
  local groups = p.num_kv_groups or 1
  -- the pool in tokens, by whole blocks; the log's 'GPU KV cache size' is
  -- p.kv_cache_tokens, which some releases count by whole requests
  local pool_tokens = (p.num_blocks // groups) * p.block_size
  local out = { string.format("  pool: %s / %s\n    = %s tokens", fmt.gib(p.kv_cache_gib),
    fmt.bytes(p.kv_bytes_per_token), fmt.int(pool_tokens)) }
  if groups > 1 then
    local per_group = p.num_layers // groups
    out[#out + 1] = string.format("%d of the %d layers only look back %s tokens (a sliding window). " ..
      "vLLM keeps the layers in %d groups of %d. The groups share one pool of %s blocks, each block " ..
      "holding %d layers: a token that every group keeps takes a slot in one block per group. So the " ..
      "pool counts as %s blocks / %d groups = %s blocks' worth of tokens.",
      p.num_sliding_layers, p.num_layers, fmt.int(p.sliding_window), groups, per_group,
      fmt.int(p.num_blocks), per_group, fmt.int(p.num_blocks), groups, fmt.int(p.num_blocks // groups))
    if p.kv_cache_tokens ~= pool_tokens then
      -- the log's figure as a difference, so two near-equal token counts
      -- never stand side by side as if they were one quantity
      out[#out + 1] = string.format("Its log line ('GPU KV cache size') counts %s tokens %s: this release " ..
        "divides the pool into requests of %s tokens (%.2f of them, %s blocks each, a window group's share rounded " ..
        "up) and multiplies back. Both are right; they count different things.",
        fmt.int(math.abs(pool_tokens - p.kv_cache_tokens)), p.kv_cache_tokens < pool_tokens and "fewer" or "more",
        fmt.int(p.max_model_len), p.max_concurrency, fmt.int(p.blocks_per_request))
    end
    if b and b.total and b.total ~= p.num_blocks then
      out[#out + 1] = string.format("kvlab's pool view runs every layer in every block: %s blocks of %d " ..
        "layers, the same tokens.", fmt.int(b.total), p.num_layers)
    end
  end
  return table.concat(out, "\n\n")
end

return {
  id = 4,
  title = "The formula on the whiteboard",
  flags = { "model", "kv-cache-dtype" },
  run = function(lab)
    local ok, err = course.start(lab, "A")
    assert(ok, err)
    local m, p = lab.model(), lab.plan()
    local cfg, path = lab.config()

    lab.page("Where the numbers live")
    lab.say("Every token a request holds costs the cache the same number of bytes. " ..
            "You do not need the weights to work that number out: the model's config.json " ..
            "has every field it depends on. This is the file kvlab just read for %s:", m.id)
    lab.say("(%s)", short_path(path))
    lab.say(fmt.table(field_rows(cfg)))
    lab.say("Every layer keeps its own K and V. num_key_value_heads counts the heads whose K and V " ..
            "are cached; the %d query heads share them.", cfg.num_attention_heads)
    if not cfg.head_dim then
      lab.say("head_dim is absent, so vLLM takes hidden_size / num_attention_heads = %d / %d = %d.",
              cfg.hidden_size, cfg.num_attention_heads, m.head_dim)
    end
    lab.say("%s means %d bytes per value.", tostring(cfg.torch_dtype), m.dtype_bytes)
    lab.say("For each token, every layer stores one key vector and one value vector per KV head, " ..
            "each head_dim values long. Written out:")
    lab.say("  bytes per token =\n" ..
            "    2 (K and V) x layers x KV heads\n" ..
            "    x head_dim x bytes per value")
    lab.say("Query heads do not appear: queries are used once, in the step that computes them, and " ..
            "never stored.")
    lab.show("log", { upto = "allocate" })
    lab.highlight("log", (course.pool_line(lab)))
    lab.pause()

    lab.page("Work it out")
    lab.say("From the file: %d layers, %d KV heads (and %d query heads), head_dim %d, %s values.",
            cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.num_attention_heads, m.head_dim,
            tostring(cfg.torch_dtype))
    lab.say("  2 x layers x KV heads\n    x head_dim x bytes")
    local bpt = p.kv_bytes_per_token
    local layers, kv, heads = cfg.num_hidden_layers, p.kv_heads_per_gpu, cfg.num_attention_heads
    expect.near(lab, "8B KV bytes per token (bf16)", bpt, 131072, 0)
    lab.ask{
      prompt = string.format("How many bytes of KV cache does one token of %s cost? (Exactly: it is " ..
                             "a product of whole numbers. KiB are fine too.)", m.id),
      answer = bpt,
      expect = "2 * model.layers * model.kv_heads * model.head_dim * model.dtype_bytes",
      unit = "bytes",
      tolerance = 0, abs = 0.5,
      near = {
        { value = bpt / 2, why = "Half of it. Either K and V were not both counted (the 2 in front), " ..
                                 "or the 2 bytes of each bf16 value were left out." },
        { value = bpt * heads / kv, why = string.format("That uses all %d attention heads. Only the %d " ..
                                 "KV heads are cached; the query heads share them.", heads, kv) },
        { value = bpt / layers, why = string.format("That is one layer. All %d layers keep their own K and V.",
                                 layers) },
        { value = bpt / 4, why = "A quarter: both the 2 for K and V and the 2 bytes per value are missing." },
      },
      hints = {
        "Multiply the five factors: 2, num_hidden_layers, num_key_value_heads, head_dim, bytes per value.",
        string.format("head_dim is not in this file: divide hidden_size by num_attention_heads (%d / %d).",
                      cfg.hidden_size, heads),
        string.format("2 x %d x %d x %d x %d.", layers, kv, m.head_dim, m.dtype_bytes),
      },
      script = "131,072 bytes",
      wrong = { "128 KB", "524288", "4096" },
      explain = formula(lab),
    }
    lab.pause()

    lab.page("From bytes to the pool")
    local exact = p.kv_cache_bytes / bpt
    lab.say("The engine did the same sum. The pool it sized at start-up is %.2f GiB, rounded; in " ..
            "bytes it is %s. Divided by %s per token:", p.kv_cache_gib, fmt.int(p.kv_cache_bytes),
            fmt.bytes(bpt))
    lab.say("  %s / %s\n  = %s tokens", fmt.int(p.kv_cache_bytes), fmt.int(bpt),
            string.format("%s.%d", fmt.int(math.floor(exact)), math.floor((exact % 1) * 10)))
    local _, _, log_tokens = course.pool_line(lab)
    lab.say("vLLM hands the pool out in whole blocks of %d tokens and drops the part of a block " ..
            "left over at the end: %s blocks x %d = %s tokens, %s.",
            p.block_size, fmt.int(p.num_blocks), p.block_size, fmt.int(p.kv_cache_tokens),
            log_tokens and "the figure in the log" or "the log's '# GPU blocks' times the block size")
    lab.show("memory")
    lab.highlight("memory", "kv", nil, fmt.int(p.kv_cache_tokens) .. " tokens")
    local conv = 8192
    local conv_explain = string.format("%s x %s = %s: one GiB per %s tokens, for this model in bf16.",
                                       fmt.int(conv), fmt.bytes(bpt), fmt.gib_of(conv * bpt), fmt.int(conv))
    lab.ask{
      prompt = string.format("A conversation reaches %s tokens. How much cache does it hold, in GiB? " ..
                             "(Within 1%%.)", fmt.int(conv)),
      answer = conv * bpt / 2 ^ 30,
      expect = "C * kv_bytes_per_token / GiB", given = { C = conv },
      unit = "GiB",
      tolerance = 0.01,
      near = {
        { value = conv * bpt / 2 ^ 30 * heads / kv,
          why = "That counts every attention head; the cache only holds the KV heads." },
        { value = conv * bpt / 2 ^ 31, why = "Half: K and V are both stored." },
      },
      hints = { string.format("Tokens times bytes per token: %s x %s, then divide by 2^30.",
                              fmt.int(conv), fmt.int(bpt)) },
      explain = conv_explain,
    }
    lab.pause()

    lab.page("Other models")
    lab.say("The same five factors size every model in the catalogue. Press f, pick model, press " ..
            "Enter, clear the box with Ctrl-U and type another id, then Enter; the sum for it appears " ..
            "on a fresh page. kv-cache-dtype takes Left/Right. Press Esc, then n, when done. A few ids:")
    local some = {}
    for _, id in ipairs(lab.catalog().models or {}) do
      for _, want in ipairs({ "Llama%-3%.1%-70B", "Qwen2%.5%-7B%-Instruct", "Mistral%-7B", "gemma%-2%-9b" }) do
        if id:find(want) and #some < 4 then some[#some + 1] = id end
      end
    end
    if #some > 0 then lab.say("%s.", table.concat(some, ", ")) end
    lab.say(formula(lab))
    -- One report at a time: each change opens a fresh page, so the newest
    -- sum is never below the fold.
    lab.on_flag(function(name, value)
      local q, mm = lab.plan(), lab.model()
      lab.page("Other models")
      if q and mm and q.kv_bytes_per_token and q.kv_bytes_per_token > 0 then
        lab.say("%s (%s cache):", mm.id, q.kv_cache_dtype)
        lab.say(formula(lab))
        if q.starts then lab.say("%s", pool_report(lab)) end
      else
        lab.say("--%s %s: no sum, the server could not start with it (the reason is below).", name, value)
      end
      lab.say("Try another (f), or press n to go on.")
    end)
    lab.pause()
  end,
}

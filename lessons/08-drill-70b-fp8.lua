-- Lesson 8: drill: 70B with an fp8 cache.
-- Bytes per token for Llama 3.1 70B in bf16 and fp8, then what one long
-- conversation holds, in decimal GB.
local fmt = require("lib.fmt")
local expect = require("lib.expect")
local course = require("lib.course")

local CONV = 32768   -- a "32K" conversation, in tokens

-- Near misses shared by the questions: value -> explanation, for a right
-- answer `a` built from `layers` layers and heads/kv query/KV heads.
local function misses(a, layers, heads, kv, extra, vb)
  local t = {
    { value = a / 2, why = string.format("Half the answer: count both K and V (the factor 2), and %d " ..
                                         "byte%s per value.", vb or 2, (vb or 2) > 1 and "s" or "") },
    { value = a * heads / kv, why = string.format("That uses the %d attention heads. Only the %d KV heads " ..
                                                  "are cached.", heads, kv) },
    { value = a / layers, why = string.format("That is a single layer; the model has %d.", layers) },
  }
  for _, e in ipairs(extra or {}) do t[#t + 1] = e end
  return t
end

-- Why plan p did not start, in a few words from its own figures.
local function why_not(p)
  if p.error_kind == "max_model_len" then
    return string.format("one %s-token request needs %s of cache and the pool is %s", fmt.int(p.max_model_len),
                         fmt.gib(p.needed_gib), fmt.gib(p.kv_cache_gib))
  elseif p.error_kind == "sampler_oom" then
    return string.format("the pool is allocated (%s tokens), then the sampler's warm-up with %s dummy " ..
                         "requests runs out of memory", fmt.int(p.kv_cache_tokens), fmt.int(p.max_num_seqs))
  end
  return "the log's last line says why"
end

return {
  id = 8,
  title = "Drill: 70B with an fp8 cache",
  flags = { "kv-cache-dtype" },
  run = function(lab)
    -- Example C: 70B with FP8 weights on one H100, pushed to 0.96 (the lesson
    -- says why, and that lesson 7's advice still holds); whether it starts
    -- there depends on the release, and the pages say what it did.
    course.start(lab, "C", { ["gpu-memory-utilization"] = 0.96 })
    local m, cfg = lab.model(), lab.config()
    local bf = lab.plan()
    course.restart(lab, "C", { ["kv-cache-dtype"] = "fp8" })
    local f8 = lab.plan()
    lab.restart{ ["kv-cache-dtype"] = "" }

    local layers, heads, kv, hd = m.layers, m.heads, m.kv_heads, m.head_dim
    lab.page("70B, by hand")
    local at90 = lab.what_if{ ["gpu-memory-utilization"] = 0.9 }
    lab.say("A third set-up, which the course calls example C: %s with FP8 weights on one H100. FP8 " ..
            "weights do not change the cache: K and V are still stored in %s unless you ask for an " ..
            "fp8 cache.", m.id, bf.kv_cache_dtype)
    if at90 and not at90.starts then
      lab.say("At utilization 0.90 this server does not start: the weights take %s of the %s " ..
              "budget, and what is left does not cover the other terms. Lesson 7 put raising utilization last, and for a real service you would add a " ..
              "second GPU or take a 4-bit checkpoint. This drill only needs the model's shape, so it " ..
              "takes the quick way and %s %.2f%s",
              fmt.gib(at90.weights_gib), fmt.gib(at90.budget_gib), bf.starts and "runs at" or "tries",
              bf.gpu_memory_utilization, bf.starts and ", with little headroom left." or
              string.format(". Under %s even that does not start: %s. The sums below need no running server.",
                            course.release_name(lab), why_not(bf)))
    end
    lab.say("Answers take units: 96 KiB, 98304 bytes, 2.5 GB and 4 GiB all mean what they say; " ..
            "a bare number is read in the unit the question names. Sizes per token must be " ..
            "exact (they are products of whole numbers); sizes of a conversation count within 1%.")
    lab.pause()
    lab.page("The shape, from config.json")
    lab.say("From its config.json:")
    lab.say(fmt.table{
      { "num_hidden_layers", tostring(cfg.num_hidden_layers) },
      { "num_attention_heads", tostring(cfg.num_attention_heads) },
      { "num_key_value_heads", tostring(cfg.num_key_value_heads) },
      { "head_dim", cfg.head_dim and tostring(cfg.head_dim) or "(absent)" },
      { "hidden_size", tostring(cfg.hidden_size) },
    })
    if not cfg.head_dim then
      lab.say("No head_dim, so hidden_size / num_attention_heads = %d / %d = %d.", cfg.hidden_size, heads, hd)
    end

    expect.near(lab, "70B KV per token, bf16 (bytes)", bf.kv_bytes_per_token, 327680, 0)
    lab.ask{
      prompt = "KV cache per token with the cache in bf16 (2 bytes per value), in KiB? (Exactly.)",
      answer = bf.kv_bytes_per_token / 1024,
      expect = "2 * model.layers * model.kv_heads * model.head_dim * B / KiB", given = { B = 2 },
      unit = "KiB",
      tolerance = 0, abs = 0.001,
      near = misses(bf.kv_bytes_per_token / 1024, layers, heads, kv),
      hints = {
        "2 x layers x KV heads x head_dim x 2 bytes, then divide by 1024.",
        string.format("2 x %d x %d x %d x 2 bytes.", layers, kv, hd),
      },
      script = "320 KiB",
      wrong = { "2560 KiB", "4 KiB", "320 KB" },
      explain = string.format("2 x %d x %d x %d x 2 = %s bytes = %s.", layers, kv, hd,
                              fmt.int(bf.kv_bytes_per_token), fmt.bytes(bf.kv_bytes_per_token)),
    }

    lab.pause()
    lab.page("An fp8 cache")
    lab.say("Same model (%d layers, %d KV heads, head_dim %d), now with --kv-cache-dtype fp8.", layers, kv, hd)
    expect.near(lab, "70B KV per token, fp8 (bytes)", f8.kv_bytes_per_token, 163840, 0)
    lab.ask{
      prompt = "Now --kv-cache-dtype fp8 (1 byte per value). KV per token, in KiB? (Exactly.)",
      answer = f8.kv_bytes_per_token / 1024,
      expect = "plan_with{ ['kv-cache-dtype'] = 'fp8' }.kv_bytes_per_token / KiB",
      unit = "KiB",
      tolerance = 0, abs = 0.001,
      near = misses(f8.kv_bytes_per_token / 1024, layers, heads, kv, {
        { value = bf.kv_bytes_per_token / 1024, why = "That is the bf16 figure: fp8 stores each value in one byte." },
      }, 1),
      hints = { "Only the bytes per value changed: 2 became 1." },
      script = "160 KiB",
      explain = string.format("Half of %s: %s per token.", fmt.bytes(bf.kv_bytes_per_token),
                              fmt.bytes(f8.kv_bytes_per_token)),
    }
    lab.pause()

    lab.page("One long conversation")
    local gb_bf = CONV * bf.kv_bytes_per_token / 1e9
    local gb_f8 = CONV * f8.kv_bytes_per_token / 1e9
    expect.near(lab, "70B 32K conversation, bf16 (GB)", gb_bf, 10.7, 0.01)
    expect.near(lab, "70B 32K conversation, fp8 (GB)", gb_f8, 5.4, 0.01)
    lab.say("A coding session grows to %s tokens (32K). GPU memory itself is binary (an H100's 80 GB " ..
            "is five 16 GiB HBM stacks, of which the driver reports %s) and vLLM's log counts in GiB " ..
            "(2^30 bytes); the seed article sizes conversations in decimal GB (10^9 bytes). Give these in " ..
            "GB, as it does.", fmt.int(CONV), fmt.gib(lab.plan().gpu_total_gib))
    lab.ask{
      prompt = string.format("How many GB of HBM does one %s-token conversation hold with a bf16 cache? " ..
                             "(Within 1%%.)",
                             fmt.int(CONV)),
      answer = gb_bf,
      expect = "C * kv_bytes_per_token / GB", given = { C = CONV },
      unit = "GB",
      tolerance = 0.01,
      near = misses(gb_bf, layers, heads, kv, {
        { value = 32000 * bf.kv_bytes_per_token / 1e9,
          why = string.format("That uses 32,000 tokens; a 32K context is %s.", fmt.int(CONV)) },
      }),
      hints = {
        string.format("Tokens x bytes per token: %s x %s.", fmt.int(CONV), fmt.int(bf.kv_bytes_per_token)),
        "Divide bytes by 10^9 for GB (by 2^30 for GiB).",
      },
      script = "10.7 GB",
      wrong = { "10 GB", "85.9 GB" },
      explain = string.format("%s x %s = %s bytes: %.1f GB, or %.1f GiB.", fmt.int(CONV),
                              fmt.int(bf.kv_bytes_per_token), fmt.int(CONV * bf.kv_bytes_per_token), gb_bf,
                              CONV * bf.kv_bytes_per_token / 2 ^ 30),
    }
    lab.ask{
      prompt = "And with --kv-cache-dtype fp8, in GB? (Within 1%.)",
      answer = gb_f8,
      expect = "C * plan_with{ ['kv-cache-dtype'] = 'fp8' }.kv_bytes_per_token / GB", given = { C = CONV },
      unit = "GB",
      tolerance = 0.01,
      near = misses(gb_f8, layers, heads, kv, {
        { value = gb_bf, why = "That is the bf16 size; the fp8 cache stores one byte per value." },
      }, 1),
      hints = { "Half the bytes per token, so half the conversation." },
      script = "5.4 GB",
      wrong = { "5 GB" },
      explain = string.format("%.1f GB: the same conversation in half the memory.", gb_f8),
    }
    lab.pause()

    lab.restart{ ["kv-cache-dtype"] = "fp8" }
    local now = lab.plan()
    lab.page("On the card")
    -- what the engine did with the fp8 cache, not what it should have done
    local allocated = now.starts or now.error_kind == "sampler_oom"   -- the pool was allocated
    lab.say("%s --kv-cache-dtype fp8. The pool in GiB did not move (%.2f GiB), but it %s %s tokens " ..
            "instead of %s.", now.starts and "The server now runs with" or "The server restarted with",
            now.kv_cache_gib, allocated and "holds" or "would hold", fmt.int(now.kv_cache_tokens),
            fmt.int(bf.kv_cache_tokens))
    if now.starts then
      lab.show("log", { upto = "allocate" })
      lab.highlight("log", (course.pool_line(lab)))
    else
      lab.say("It still does not start under %s: %s. An fp8 cache halves the price of a token; the " ..
              "terms taken before the pool stay where they were.", course.release_name(lab), why_not(now))
      lab.show("log")
      local last = lab.log()[#lab.log()]
      if last then lab.highlight("log", last.text:sub(1, 60)) end
    end
    lab.pause()
  end,
}

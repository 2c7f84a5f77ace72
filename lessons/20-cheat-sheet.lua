-- Lesson 20: the sizing checklist, run live on the learner's own model and GPU.
local fmt = require("lib.fmt")
local course = require("lib.course")

local BASE = course.example("A")

-- The traffic the learner's service is assumed to see: mostly a few thousand
-- tokens, with a tail of long ones. Drawn with the lesson's seeded random.
local function context_sample(lab, cap)
  local lens = {}
  for i = 1, 400 do
    local v
    if lab.random() < 0.9 then v = lab.random(500, 4000) else v = lab.random(4000, 20000) end
    lens[i] = math.min(v, cap)
  end
  table.sort(lens)
  return lens, lens[math.ceil(#lens * 0.99)]
end

local function round_up(v, step) return math.ceil(v / step) * step end

local function kv_heads_per_gpu(lab)
  local p = lab.plan()
  return p.kv_heads_per_gpu
end

return {
  id = 20,
  title = "Cheat sheet",
  flags = { "model", "gpu", "max-model-len", "gpu-memory-utilization", "kv-cache-dtype", "quantization",
            "tensor-parallel-size", "max-num-seqs" },
  run = function(lab)
    lab.page("Your deployment")
    lab.start(BASE)
    course.note(lab, "A")
    lab.show("flags"); lab.show("memory"); lab.show("log")
    lab.say("The whole course fits in six steps. Run them on a deployment of your own: pick "
      .. "any model in the catalogue (or type the path of a config.json) and any GPU in the "
      .. "flags view. The server does not have to start yet.")
    lab.highlight("flags", "model"); lab.highlight("flags", "gpu")
    lab.goal{
      text = "Choose a model or a GPU other than the example (8B on an H100).",
      check = function()
        return lab.flag("model") ~= BASE.model or lab.flag("gpu") ~= BASE.gpu
      end,
      hints = { "Select model in the flags view and type an id such as Qwen/Qwen2.5-14B-Instruct, "
                .. "or set gpu to a100-80gb." },
      script = { { "model", "Qwen/Qwen2.5-14B-Instruct" }, { "gpu", "a100-80gb" } },
    }
    lab.unhighlight()
    local m, g = lab.model(), lab.gpu()
    if not m or not g then error("the chosen model or GPU could not be read") end

    lab.page("1. Bytes per token")
    local p = lab.plan()
    lab.say("%s: %d layers, %d attention heads, %d KV heads of %d values. On %s at "
      .. "tensor-parallel-size %d, each GPU keeps %d KV heads.", m.id, m.layers, m.heads,
      m.kv_heads, m.head_dim, g.name, p.tensor_parallel_size, kv_heads_per_gpu(lab))
    local near = {}
    local function add_near(v, why)
      if v > 0 and math.abs(v - p.kv_bytes_per_token) > 0.02 * p.kv_bytes_per_token then
        near[#near + 1] = { value = v, why = why }
      end
    end
    add_near(p.kv_bytes_per_token / 2, "Count both K and V.")
    add_near(p.kv_bytes_per_token * m.heads / math.max(m.kv_heads, 1),
      "Only the KV heads are cached, not every attention head.")
    local hints = { string.format("2 (K and V) x %d layers x %d KV heads per GPU x %d values x %s bytes per value.",
                      m.layers, kv_heads_per_gpu(lab), m.head_dim, tostring(p.kv_dtype_bytes)) }
    if p.kv_cache_tokens > 0 then
      hints[2] = string.format("Some models (latent attention, sliding windows) change a factor. The start-up "
        .. "log gives it too: %.2f GiB of pool for %s tokens.", p.kv_cache_gib, fmt.int(p.kv_cache_tokens))
    end
    lab.ask{
      prompt = "How many bytes of KV does one token take on one GPU?",
      answer = p.kv_bytes_per_token, unit = "bytes", tolerance = 0.01,
      expect = "2 * num_layers * kv_heads_per_gpu * head_size * kv_dtype_bytes",
      near = near,
      hints = hints,
    }

    lab.page("2. The pool")
    p = lab.plan()
    lab.say("The budget is %.2f GiB x %s. From it %s subtracts, per GPU:", p.gpu_total_gib,
      tostring(p.gpu_memory_utilization), course.release_name(lab))
    -- the terms this release takes off the budget, in its order; the ones it
    -- does not count (measured outside its budget) in parentheses
    local function term_rows(q)
      local rows, outside = { { "budget", string.format("%.2f GiB", q.budget_gib) } }, false
      for _, t in ipairs(q.terms or {}) do
        if t.name ~= "kv_cache" and t.name ~= "budget" and (t.counted or t.gib > 0) then
          local label = course.term_label(t.name)
          if t.counted then
            rows[#rows + 1] = { "- " .. label, string.format("%.2f GiB", t.gib) }
          else
            rows[#rows + 1] = { "(" .. label .. ")", string.format("(%.2f GiB)", t.gib) }
            outside = true
          end
        end
      end
      return rows, outside
    end
    local rows, outside = term_rows(p)
    lab.say(fmt.table(rows))
    if outside then
      lab.say("In parentheses: memory the server uses that this release does not take off the budget " ..
        "(it exists before vLLM measures, or is captured after the pool is sized).")
    end
    if p.kv_cache_gib <= 0 then
      lab.say("Nothing is left for the cache: vLLM would refuse to start. Shrink the weights "
        .. "(quantization), split them (tensor-parallel-size) or pick a bigger GPU.")
      lab.goal{
        text = "Leave some memory for the KV pool.",
        check = function() return lab.plan().kv_cache_gib > 0 end,
        hints = { "quantization fp8 halves 16-bit weights.", "tensor-parallel-size 2 splits them over two GPUs." },
        script = { { "tensor-parallel-size", "2" } },
      }
      p = lab.plan()
    end
    lab.ask{
      prompt = "How much memory is left for the KV pool on each GPU?",
      answer = p.kv_cache_gib, unit = "GiB", tolerance = 0.02,
      -- the subtraction of the start-up plan, term by term: the ones the release counts
      expect = "local s = budget_bytes; for _, t in ipairs(terms) do "
        .. "if t.counted and t.name ~= 'kv_cache' and t.name ~= 'budget' then s = s - t.bytes end end; return s / GiB",
      near = (p.budget_gib - p.weights_gib) > 1.03 * p.kv_cache_gib
        and { { value = p.budget_gib - p.weights_gib, why = "Subtract the overheads too, not only the weights." } } or {},
      hints = { "Budget minus every line below it that is not in parentheses.",
                (function()
                  local parts = { string.format("%.2f", p.budget_gib) }
                  for _, t in ipairs(p.terms or {}) do
                    if t.counted and t.name ~= "kv_cache" and t.name ~= "budget" then parts[#parts + 1] = string.format("%.2f", t.gib) end
                  end
                  return table.concat(parts, " - ") .. " GiB."
                end)() },
    }

    lab.page("3. Divide")
    lab.ask{
      prompt = "How many tokens does that pool hold?",
      answer = p.kv_cache_tokens, unit = "tokens", tolerance = 0.02,
      expect = "floor(kv_cache_bytes / (kv_bytes_per_token * block_size)) * block_size",
      near = { { value = p.kv_cache_tokens / p.block_size, why = "That is blocks. Multiply by the block size." } },
      hints = { string.format("%.2f GiB / %s per token (GiB = 2^30 bytes).", p.kv_cache_gib,
                  fmt.bytes(p.kv_bytes_per_token)) },
      explain = "That token count is what your deployment is made of: every request in flight shares it.",
    }

    lab.page("4. max-model-len from the p99")
    local lens, p99 = context_sample(lab, m.max_position_embeddings)
    local target = math.min(round_up(p99, 1024), m.max_position_embeddings)
    lab.say("Say your service logged %d requests: the median is %s tokens, the longest %s, and "
      .. "99%% are at most %s. Size for that p99, not for the model's %s, and not for the median.",
      #lens, fmt.int(lens[#lens // 2]), fmt.int(lens[#lens]), fmt.int(p99), fmt.int(m.max_position_embeddings))
    lab.highlight("flags", "max-model-len")
    -- auto (or -1) takes the model's limit or, where that does not fit, the
    -- longest one request the pool holds: one at a time, whatever the
    -- traffic. It can land in the range; it is no sizing.
    local function auto_len()
      local v = lab.flag("max-model-len"):lower()
      return v == "auto" or v == "-1"
    end
    lab.on_flag(function(name)
      local q = lab.plan()
      if name == "max-model-len" and auto_len() and q and q.starts then
        lab.say("Not counted: max-model-len auto takes the model's own limit, or the longest one request the " ..
          "pool can hold (here %s tokens, %s at once). It sizes for the model, not for your p99: size it " ..
          "yourself.", fmt.int(q.max_model_len), fmt.x(q.max_concurrency))
      end
    end)
    lab.goal{
      text = string.format("Start the server with max-model-len between %s and %s.",
        fmt.int(p99), fmt.int(math.floor(target * 1.25))),
      check = function()
        local q = lab.plan()
        return q ~= nil and q.starts and q.max_model_len >= p99 and q.max_model_len <= target * 1.25
          and not auto_len()
      end,
      -- where the release takes auto (its own argument check refuses it before)
      wrong = lab.what_if{ ["max-model-len"] = "auto" }
        and { { { "max-model-len", "auto" }, says = "Not counted: max-model-len auto" } } or nil,
      hints = { string.format("Set max-model-len to %d.", target),
                "If it still does not start, the pool is too small for one such request: "
                .. "try kv-cache-dtype fp8, quantization fp8, or tensor-parallel-size 2." },
      script = { { "max-model-len", tostring(target) } },
    }
    lab.on_flag(nil)
    lab.unhighlight()
    p = lab.plan()
    -- whole requests, as lesson 11 counts them; vLLM's log gives the ratio
    local whole = math.floor(p.kv_cache_tokens / p.max_model_len)
    local nears = {}
    for _, n in ipairs{
      { value = math.floor(p.kv_cache_tokens / m.max_position_embeddings),
        why = "Divide by the max-model-len you set, not the model's maximum." },
      { value = math.ceil(p.kv_cache_tokens / p.max_model_len),
        why = "Rounded up: the last request would not fit whole. Count whole requests, rounding down." } } do
      if n.value ~= whole then nears[#nears + 1] = n end
    end
    lab.ask{
      prompt = "How many whole requests of that length fit in the pool at once? (A count, as in lesson 11.)",
      answer = whole, unit = "requests", tolerance = 0, abs = 0.5,
      expect = "floor(kv_cache_tokens / max_model_len)",
      near = nears,
      hints = { string.format("%s tokens / %s tokens per request, rounded down.", fmt.int(p.kv_cache_tokens),
                  fmt.int(p.max_model_len)) },
      explain = string.format("%s / %s = %.2f: %d whole requests. vLLM's log gives the ratio itself: " ..
        "'Maximum concurrency ... %s'.", fmt.int(p.kv_cache_tokens), fmt.int(p.max_model_len), p.max_concurrency,
        whole, fmt.x(p.max_concurrency)),
    }

    lab.page("5 and 6. Leave the rest alone")
    p = lab.plan()
    -- the release's default, from the engine (the flag left unset)
    local dflt = lab.what_if{ ["gpu-memory-utilization"] = "" }
    lab.say("5. Keep gpu-memory-utilization at or a little under vLLM's default%s. Yours is %s. "
      .. "Needing more is a sign the GPU is too small; it eats the headroom that keeps a "
      .. "long-running server from failing later.",
      (dflt and not lab.release.textbook) and string.format(" (%s in %s)", tostring(dflt.gpu_memory_utilization),
        course.release_name(lab)) or "", tostring(p.gpu_memory_utilization))
    -- what a higher max-num-seqs costs at start-up in this release, from the engine
    local seqs = tonumber(p.max_num_seqs) or 0
    local more = seqs > 0 and lab.what_if{ ["max-num-seqs"] = 2 * seqs } or nil
    local why = more and course.seqs_cost(p, more)
    lab.say("6. Tune max-num-seqs last, and for latency. Raising it never makes the pool bigger "
      .. "(lessons 14 and 16)%s.", (more and more.starts and more.kv_cache_tokens < p.kv_cache_tokens)
        and string.format("; in %s it makes it smaller (max-num-seqs %d: %s tokens instead of %s)%s",
          course.release_name(lab), 2 * seqs, fmt.int(more.kv_cache_tokens), fmt.int(p.kv_cache_tokens),
          why and (": " .. why) or "") or "")
    -- the flags that differ from vLLM's defaults ("none" and "auto" are
    -- what kvlab shows for unset; vLLM itself refuses --quantization none)
    local cmd = { "vllm serve " .. m.id, "--max-model-len " .. p.max_model_len,
                  "--gpu-memory-utilization " .. tostring(p.gpu_memory_utilization) }
    if p.tensor_parallel_size > 1 then cmd[#cmd + 1] = "--tensor-parallel-size " .. p.tensor_parallel_size end
    local quant = lab.flag("quantization")
    if quant ~= "" and quant ~= "none" then cmd[#cmd + 1] = "--quantization " .. quant end
    local kvd = lab.flag("kv-cache-dtype")
    if kvd ~= "" and kvd ~= "auto" then cmd[#cmd + 1] = "--kv-cache-dtype " .. kvd end
    if lab.flag("max-num-seqs") ~= "" then cmd[#cmd + 1] = "--max-num-seqs " .. lab.flag("max-num-seqs") end
    lab.say("Your command:")
    lab.say("%s", fmt.quote(table.concat(cmd, " ")))
    if quant == "awq" or quant == "gptq" then
      lab.say("(--quantization %s needs a %s checkpoint of the model: the same command on these " ..
        "weights would not load.)", quant, quant:upper())
    end
    lab.say("It gives %s tokens of cache: %d whole requests of %s tokens at once (the log's Maximum " ..
      "concurrency: %s).", fmt.int(p.kv_cache_tokens), math.floor(p.kv_cache_tokens / p.max_model_len),
      fmt.int(p.max_model_len), fmt.x(p.max_concurrency))
    lab.pause()

    course.release_page(lab, fmt, "Your command on a real vLLM")
  end,
}

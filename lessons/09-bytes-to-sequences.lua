-- Lesson 9: from bytes to sequences.
-- Concurrency = pool / (bytes per token x tokens per sequence), read off the
-- start-up log of running example B; FP8 weights multiply the pool.
local fmt = require("lib.fmt")
local expect = require("lib.expect")
local pick = require("lib.pick")
local course = require("lib.course")

local LEN = 8192

-- Figures of a configuration without leaving it running: start it, read the
-- plan, put the previous flags back. The app only redraws when the lesson
-- waits, so the learner never sees the detour.
local function peek(lab, changes)
  local undo = {}
  for k in pairs(changes) do undo[k] = lab.flag(k) end
  course.restart(lab, "B", changes)
  local p = lab.plan()
  lab.restart(undo)
  return p
end

return {
  id = 9,
  title = "From bytes to sequences",
  flags = { "max-model-len", "quantization", "kv-cache-dtype", "gpu-memory-utilization" },
  run = function(lab)
    local ok, err = course.start(lab, "B", { ["max-model-len"] = LEN })
    assert(ok, err)
    local p = lab.plan()
    local per_seq = p.kv_bytes_per_token * LEN
    expect.seed(lab, "example B at 8K: maximum concurrency", p.max_concurrency, 2.83, 0.01)

    lab.page("How many at once")
    lab.say("Example B again, from lesson 7: %s on an RTX 4090 that reports %.2f GiB, now with " ..
            "--max-model-len %d so that it starts. The start-up line with 'Maximum concurrency' turns the pool into requests:",
            lab.model().id, p.gpu_total_gib, LEN)
    lab.show("log", { upto = "allocate" })
    lab.highlight("log", "Maximum concurrency")
    lab.say("  at once = pool / (bytes per token\n" ..
            "    x tokens per request)")
    lab.say("  %.2f GiB / (%s x %s)\n  = %.2f GiB / %s = %s", p.kv_cache_gib, fmt.bytes(p.kv_bytes_per_token),
            fmt.int(LEN), p.kv_cache_gib, fmt.gib_of(per_seq), fmt.x(p.max_concurrency))
    lab.say("vLLM prints this for requests that use the whole max-model-len, the worst case it " ..
            "promised to accept. Shorter requests fit more; the pool is the real limit.")

    local half = peek(lab, { ["max-model-len"] = LEN // 2 })
    lab.ask{
      prompt = string.format("Restart with --max-model-len %d. What will 'Maximum concurrency' read? " ..
                             "(Two decimals, within 1%%.)", LEN // 2),
      answer = half.max_concurrency,
      expect = "plan_with{ ['max-model-len'] = N }.max_concurrency", given = { N = LEN // 2 },
      unit = "x",
      tolerance = 0.01,
      near = {
        { value = p.max_concurrency / 2, why = "Shorter requests need less each, so more of them fit, not fewer." },
        { value = p.max_concurrency, why = "The pool did not change, but each request now needs half as much of it." },
      },
      hints = { "Tokens per request is the denominator. Halve it." },
      explain = string.format("%s: the same pool, requests half as long, twice as many.",
                              fmt.x(half.max_concurrency)),
    }
    lab.restart{ ["max-model-len"] = LEN // 2 }
    lab.say("kvlab restarted the server with --max-model-len %d: the log's 'Maximum concurrency' " ..
      "line now says so.", LEN // 2)
    lab.highlight("log", "Maximum concurrency", nil, "now " .. fmt.x(lab.plan().max_concurrency))
    lab.pause()
    lab.restart{ ["max-model-len"] = LEN }

    local q8 = peek(lab, { quantization = "fp8" })
    local kv8 = peek(lab, { ["kv-cache-dtype"] = "fp8" })
    local mult = q8.kv_cache_gib / p.kv_cache_gib
    expect.seed(lab, "example B: FP8 weights multiply the pool", mult, 3.3, 0.02)
    lab.page("The weights are the big lever")
    lab.say("The pool is what is left after the weights. On this card the weights are most of the " ..
            "budget, so every GiB they give back goes straight to the pool:")
    lab.say(fmt.table{
      { "weights", "GiB", "pool GiB", "at once" },
      { "bf16", string.format("%.2f", p.weights_gib), string.format("%.2f", p.kv_cache_gib),
        fmt.x(p.max_concurrency) },
      { "fp8", string.format("%.2f", q8.weights_gib), string.format("%.2f", q8.kv_cache_gib),
        fmt.x(q8.max_concurrency) },
    })
    lab.say("(at once: requests of %s tokens; fp8 is --quantization fp8.)", fmt.int(LEN))
    lab.say("Nearly halving the weights (%s down to %s) multiplied the pool by %.1f, because nothing " ..
            "else on the card moved.", fmt.gib(p.weights_gib), fmt.gib(q8.weights_gib), mult)

    lab.pause()

    local target = pick.between(kv8.max_concurrency, q8.max_concurrency)
    local start = {}
    for _, f in ipairs({ "max-model-len", "quantization", "kv-cache-dtype", "gpu-memory-utilization" }) do
      start[f] = lab.flag(f)
    end
    lab.page("Your turn")
    lab.say("The team needs %d requests of %s tokens at once on this one 4090. Change " ..
            "flags in the flags view (f) until the server offers that, without making max-model-len " ..
            "shorter than %s.", target, fmt.int(LEN), fmt.int(LEN))
    -- One report per page, so the newest is never below the fold.
    local goal_text = string.format("%d requests of %s tokens at once", target, fmt.int(LEN))
    lab.on_flag(function(name, value)
      local q = lab.plan()
      lab.page("Your turn")
      if q and q.starts then
        lab.say("--%s %s: %.2f GiB pool, room for %d whole requests of %s tokens (%s).", name,
                value == "" and "(default)" or value, q.kv_cache_gib, q.kv_cache_tokens // LEN, fmt.int(LEN),
                fmt.x(q.kv_cache_tokens / LEN))
      elseif q then
        lab.say("--%s %s: the server does not start (%s).", name, value == "" and "(default)" or value,
                q.error_kind)
      end
      local util = tonumber(lab.flag("gpu-memory-utilization")) or p.gpu_memory_utilization
      if util > p.gpu_memory_utilization + 1e-9 then
        lab.say("That counts as not met: utilization above %.2f is the last resort (lessons 7 and 8). " ..
                "It buys a little pool by eating the headroom the server needs once traffic arrives. " ..
                "Put it back to %.2f and shrink what takes the most room instead.", p.gpu_memory_utilization,
                p.gpu_memory_utilization)
      end
      local ckpt = course.checkpoint_quant(lab)
      if ckpt then lab.say("%s", ckpt) end
      lab.say("The target: %s, max-model-len at least %d, utilization %.2f. Change another flag (f) if " ..
              "it is not met yet.", goal_text, LEN, p.gpu_memory_utilization)
    end)
    lab.goal{
      text = string.format("Serve %d requests of %s tokens at once (max-model-len at least %s, " ..
                           "utilization %.2f).", target, fmt.int(LEN), fmt.int(LEN), p.gpu_memory_utilization),
      check = function()
        local q = lab.plan()
        return lab.running() and q.max_model_len >= LEN and q.kv_cache_tokens / LEN >= target
          and q.gpu_memory_utilization <= p.gpu_memory_utilization + 1e-9 and not course.checkpoint_quant(lab)
      end,
      -- an fp8 cache plus a higher utilization reaches the number, with the wrong lever;
      -- 4-bit weights need a 4-bit checkpoint
      wrong = { { { "kv-cache-dtype", "fp8" }, { "gpu-memory-utilization", "0.95" }, says = "last resort" },
                { { "quantization", "awq" }, says = "Not counted: --quantization awq needs an AWQ checkpoint" } },
      hints = {
        string.format("An fp8 KV cache alone gives %s: not enough.", fmt.x(kv8.max_concurrency)),
        "The biggest term on this card is the weights. Which flag shrinks them?",
        "Set quantization to fp8.",
      },
      script = { { "quantization", "fp8" } },
    }
    local q = lab.plan()
    local changed = {}
    for _, f in ipairs({ "max-model-len", "quantization", "kv-cache-dtype", "gpu-memory-utilization" }) do
      if lab.flag(f) ~= start[f] then changed[#changed + 1] = string.format("--%s %s", f, lab.flag(f)) end
    end
    if #changed > 0 then
      lab.say("Flags in effect, besides the starting command: %s.", table.concat(changed, ", "))
    end
    lab.say("Done: room for %d whole requests of %s tokens (%s). Every figure in this lesson came from the " ..
            "same division: pool / (bytes per token x tokens per request).", q.kv_cache_tokens // LEN, fmt.int(LEN),
            fmt.x(q.kv_cache_tokens / LEN))
    lab.pause()
  end,
}

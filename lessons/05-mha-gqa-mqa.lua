-- Lesson 5: MHA, GQA and MQA.
-- One model shape, three ways of sharing K/V between query heads; the cache
-- follows the KV heads, not the parameter count.
local fmt = require("lib.fmt")
local expect = require("lib.expect")
local heads = require("lib.heads")
local pick = require("lib.pick")
local course = require("lib.course")

local LEN = 8192

return {
  id = 5,
  title = "MHA, GQA and MQA",
  flags = { "kv-heads", "max-model-len" },
  run = function(lab)
    local ok, err = course.start(lab, "A", { ["max-model-len"] = LEN })
    assert(ok, err)
    local m = lab.model()
    local q = m.heads

    -- The same shape with every query head its own K/V (MHA), the model as
    -- shipped (GQA) and one K/V for all (MQA). Only the cache changes.
    local variants = {
      { name = "MHA", kv = q },
      { name = "GQA", kv = m.kv_heads },
      { name = "MQA", kv = 1 },
    }
    for _, v in ipairs(variants) do
      course.restart(lab, "A", { ["kv-heads"] = v.kv })
      local p = lab.plan()
      v.bpt, v.gib, v.tokens, v.conc = p.kv_bytes_per_token, p.kv_cache_gib, p.kv_cache_tokens, p.max_concurrency
    end
    lab.restart{ ["kv-heads"] = "" }

    lab.page("Who shares a key")
    lab.say("%s has %d query heads in every layer. How many K/V pairs sit behind them is part of the " ..
            "checkpoint (num_key_value_heads): chosen when the model is designed, or set by converting an " ..
            "MHA checkpoint and training it a little more (the GQA paper's \"uptraining\"). No vllm serve " ..
            "flag changes it, and it is the number that sizes the cache:", m.id, q)
    lab.say("Multi-head attention (MHA): each query head reads its own keys and values.")
    lab.say(heads.groups(q, q))
    lab.say("Grouped-query attention (GQA), the shipped model: %d query heads per K/V pair.", q // m.kv_heads)
    lab.say(heads.groups(q, m.kv_heads))
    lab.say("Multi-query attention (MQA): all %d query heads read one K/V pair.", q)
    lab.say(heads.groups(q, 1))
    local extra = 2 * m.layers * m.hidden_size * (q - m.kv_heads) * m.head_dim
    lab.say("A real MHA version would also carry bigger K and V projection matrices: %.2f billion " ..
            "more parameters here, %s of the model. kvlab's kv-heads override leaves the weights as they " ..
            "are, so that only the cache moves in what follows.", extra / 1e9, fmt.pct(extra / m.params))
    lab.pause()

    lab.page("Same card, three prices per token")
    lab.say("kvlab started the same server three times on one H100, changing only kv-heads " ..
            "(a hypothetical override: the weights stay as they are). Requests of %s tokens:", fmt.int(LEN))
    local rows, prices = { { "", "KV", "tokens", "at once" } }, {}
    for _, v in ipairs(variants) do
      rows[#rows + 1] = { v.name, v.kv, fmt.int(v.tokens), fmt.x(v.conc) }
      prices[#prices + 1] = string.format("%s %s", v.name, fmt.bytes(v.bpt))
    end
    lab.say("KV per token: %s.", table.concat(prices, ", "))
    lab.say(fmt.table(rows))
    lab.say("(KV: KV heads; tokens: the pool in tokens; at once: requests of %s tokens.)", fmt.int(LEN))
    -- Whole blocks: the ratio of KV heads holds only up to the leftover of
    -- each pool; show a pair where it shows (it can divide evenly).
    local r1, r2 = variants[1].kv // variants[2].kv, variants[2].kv // variants[3].kv
    local blocks_note = "Here every pool happens to divide into whole blocks, so the ratios hold to the token."
    for _, pr in ipairs({ { variants[1], r1, variants[2] }, { variants[2], r2, variants[3] } }) do
      local few, r, many = pr[1], pr[2], pr[3]
      if few.tokens * r ~= many.tokens then
        blocks_note = string.format("Not to the last token: each pool is cut into whole blocks and the " ..
          "leftover, less than a block, is dropped (%s: %s x %d = %s; %s: %s).", few.name, fmt.int(few.tokens), r,
          fmt.int(few.tokens * r), many.name, fmt.int(many.tokens))
        break
      end
    end
    lab.say("The pool is %.2f GiB in every row: none of the subtracted terms moved. " ..
            "Only the price of a token did, so tokens and requests move by the ratio of KV heads: " ..
            "%d times fewer than GQA for MHA, %d times more for MQA. %s", variants[1].gib, r1, r2, blocks_note)
    expect.near(lab, "8B bytes/token with 8 KV heads", variants[2].bpt, 131072, 0)
    expect.near(lab, "MHA/GQA bytes ratio", variants[1].bpt / variants[2].bpt, 4, 0)
    expect.near(lab, "GQA/MHA pool-token ratio", variants[2].tokens / variants[1].tokens, 4, 0.01)
    expect.near(lab, "pool GiB unchanged by KV heads", variants[1].gib, variants[3].gib, 0.0001)
    lab.show("log", { upto = "allocate" })
    lab.highlight("log", "Maximum concurrency")
    lab.pause()

    -- A target that GQA meets and MHA does not, rounded so it reads as a
    -- requirement, not as an engine figure.
    local target = pick.between(variants[1].conc, variants[2].conc)
    local correct = 3
    for i, v in ipairs(variants) do
      if v.conc >= target then correct = i; break end
    end
    lab.page("Pick a variant")
    lab.say("A product team wants %d conversations of %s tokens at once on this H100, and the " ..
            "research team wants as many KV heads as that allows (more KV heads usually means " ..
            "slightly better quality). Try kv-heads in the flags view if you like: the log's " ..
            "'Maximum concurrency' line is the number to watch.", target, fmt.int(LEN))
    local choices, why = {}, {}
    for i, v in ipairs(variants) do
      choices[i] = string.format("%s (%d KV head%s)", v.name, v.kv, v.kv == 1 and "" or "s")
      if i < correct then
        why[i] = string.format("%s has room for only %s: short of %d.", v.name, fmt.room(v.conc, LEN),
                               target)
      elseif i > correct then
        why[i] = string.format("%s fits (room for %s), but gives up more KV heads than the target needs.",
                               v.name, fmt.room(v.conc))
      end
    end
    lab.ask{
      prompt = string.format("Which variant keeps the most KV heads while serving %d requests of %s tokens at once?",
                             target, fmt.int(LEN)),
      choices = choices,
      correct = correct,
      why = why,
      hints = {
        "Requests at once = pool tokens / tokens per request. The table one page back (p) has both.",
        "Go down the list from the most KV heads and stop at the first that reaches the target.",
      },
      explain = string.format("%s: room for %s at once, with %d KV heads.", variants[correct].name,
                              fmt.room(variants[correct].conc), variants[correct].kv),
    }
    lab.pause()
    lab.page("What sizes the cache")
    lab.say("What sizes the cache is the count of KV heads; the parameter count barely enters into " ..
            "it. In this what-if the weights were held fixed and only kv-heads changed the cache (a real " ..
            "MHA model would also be %.2f billion parameters bigger, page 1), yet one variant holds %d " ..
            "times the conversations of another.", extra / 1e9, variants[1].kv // variants[3].kv)
    lab.pause()
  end,
}

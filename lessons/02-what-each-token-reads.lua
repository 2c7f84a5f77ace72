-- Lesson 2: one request decodes token by token; every step reads the keys
-- and values of every earlier token, in every layer.
local fmt = require("lib.fmt")
local ask = require("lib.ask")
local course = require("lib.course")

local PROMPT, OUTPUT = 10, 22

return {
  id = 2,
  title = "What each new token reads",
  flags = {},
  run = function(lab)
    local ok, err = course.start(lab, "A")
    if not ok then error("example A should start: " .. tostring(err)) end
    local model, plan = lab.model(), lab.plan()
    local L, H = plan.num_layers, plan.kv_heads_per_gpu
    local per_token = 2 * L * H -- K and V vectors one token keeps on this GPU

    lab.page("One token at a time")
    lab.show("pool")
    lab.show("requests")
    lab.say("Same server as in lesson 1 (example A: Llama 3.1 8B on one H100). A transformer writes its answer one token at a time, and to " ..
      "produce each new token every attention layer compares it with all the tokens before it. " ..
      "For that it needs each earlier token's key vector and value vector, in that layer.")
    lab.say("%s has %d layers and %d KV heads of %d values each. So one token leaves behind " ..
      "2 (a key and a value) x %d layers x %d KV heads = %s vectors, %s in %s.",
      model.id, L, H, plan.head_size, L, H, fmt.int(per_token), fmt.bytes(plan.kv_bytes_per_token),
      plan.kv_cache_dtype)
    lab.say("Let us send a short request: a %d-token prompt, %d tokens to write. Press next and " ..
      "watch the first step.", PROMPT, OUTPUT)
    lab.pause()

    lab.page("Prefill")
    lab.plot({ title = "K/V vectors read by each step", xlabel = "tokens so far",
      ylabel = "vectors read", series = { "vectors read by a step" } })
    local id = lab.submit({ prompt_tokens = PROMPT, output_tokens = OUTPUT })
    lab.speed(3)
    lab.step(1)
    local r = lab.request(id)
    lab.highlight("pool", "request", { id }, "prompt")
    lab.say("The first step is the prefill: one forward pass over all %d prompt tokens. It writes " ..
      "their keys and values into the cache (%d block%s of %d tokens) and samples the first output " ..
      "token.", r.num_computed_tokens, r.num_blocks, r.num_blocks == 1 and "" or "s", plan.block_size)
    lab.pause()

    lab.page("Decode")
    lab.say("The plot view counts, for each decode step (x: tokens in the sequence so far), how " ..
      "many key and value vectors that step reads (y).")
    lab.say("Every later step is a decode step: it runs the newest token alone. The token's own key " ..
      "and value are appended to the cache, then attention reads the keys and values of every " ..
      "token so far, the new one included, in all %d layers.", L)
    lab.show("plot")
    lab.focus("plot") -- the page is about the line it draws
    local last_reads = 0
    while true do
      r = lab.request(id)
      if not r or r.state == "finished" then break end
      lab.step(1)
      r = lab.request(id)
      if not r then break end
      local t = r.num_computed_tokens
      last_reads = per_token * t
      lab.plot_add(1, t, last_reads)
      lab.unhighlight("pool")
      lab.highlight("pool", "layers", { id }, string.format("token %d reads %s vectors", t, fmt.int(last_reads)))
    end
    lab.say("The line climbs by %s vectors per step: each step reads everything the ones before " ..
      "it read, plus one more token. Those keys and values never change once written, so computing " ..
      "them again would be waste. Keeping them is the KV cache.", fmt.int(per_token))
    lab.pause()

    lab.page("Count them")
    lab.unhighlight()
    local T = 1000
    local answer = per_token * T
    ask.count(lab, {
      prompt = string.format("A decode step processes token number %s of a conversation (the %s " ..
        "before it are cached). Count one key or one value, of one KV head, in one layer, as one " ..
        "vector. How many vectors does that step read on this GPU? (Exactly: it is a count.)",
        fmt.int(T), fmt.int(T - 1)),
      answer = answer,
      expect = "2 * num_layers * kv_heads_per_gpu * T", given = { T = T },
      unit = "vectors",
      exact = true,
      near = {
        { value = per_token * (T - 1), why = string.format("That leaves out the new token itself. Its key " ..
          "and value are written to the cache first, and attention reads them too: %s tokens, not %s.",
          fmt.int(T), fmt.int(T - 1)) },
        { value = per_token * (T + 1), why = string.format("One token too many: the step reads the %s " ..
          "cached tokens plus the new one, %s in all.", fmt.int(T - 1), fmt.int(T)) },
        { value = answer / 2, why = "That counts only the keys (or only the values): attention needs both." },
        { value = answer * model.heads / H, why = string.format(
          "You counted the %d attention heads. Only the %d KV heads are cached; the query heads share them.",
          model.heads, H) },
        { value = answer / L, why = string.format("That is one layer. All %d layers read their own cache.", L) },
        { value = per_token, why = "That is what one token leaves behind; the step reads every earlier token too." },
      },
      hints = {
        "Per token: a key and a value, in every layer, for every KV head.",
        string.format("Per token that is 2 x %d x %d = %s vectors; now multiply by the tokens read.",
          L, H, fmt.int(per_token)),
      },
      explain = string.format("2 x %d layers x %d KV heads x %s tokens = %s vectors, each %d values: " ..
        "%s read from memory for one new token.", L, H, fmt.int(T), fmt.int(answer), plan.head_size,
        fmt.bytes(plan.kv_bytes_per_token * T)),
    })
    lab.pause()

    lab.page("Why it matters")
    lab.say("Each new token costs a fixed amount of cache (%s here) and every step rereads the " ..
      "whole sequence from it. Long conversations are therefore expensive twice: in memory held, " ..
      "and in bytes moved per step. Lesson 3 shows the alternative to keeping the cache.",
      fmt.bytes(plan.kv_bytes_per_token))
    lab.pause()
  end,
}

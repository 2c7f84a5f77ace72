-- A page that sets a figure against itself: "A x 4 = B, not B" where the
-- pool divided evenly (lesson 5 under vLLM 0.33.0 and 0.11.0). kvlab check
-- must stop at the lab.say (lsn_figures.c).
return {
  id = 16, flags = {},
  run = function(lab)
    lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb" }
    local p = lab.plan()
    lab.say("Whole blocks: (%s x 1 = %s, not %s).", string.format("%d", p.kv_cache_tokens),
            string.format("%d", p.kv_cache_tokens), string.format("%d", p.kv_cache_tokens))
    lab.pause()
  end,
}

-- One page, one quantity, two figures: the pool's size at two precisions
-- reads as two different things (the issue's "needs 2.8 GiB; the pool has
-- 2.83 GiB"). kvlab check must stop at the second lab.say (lsn_figures.c).
return {
  id = 13, flags = {},
  run = function(lab)
    lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "rtx-4090", ["max-model-len"] = 8192 }
    local p = lab.plan()
    lab.say("The pool is %.1f GiB.", p.kv_cache_gib)
    lab.say("Its blocks fill %.2f GiB, %s tokens.", p.kv_cache_gib, string.format("%d", p.kv_cache_tokens))
    lab.pause()
  end,
}

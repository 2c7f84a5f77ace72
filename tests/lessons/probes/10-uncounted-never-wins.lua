-- A goal whose check a model override (kv-heads) would meet: MHA-sized KV
-- makes one 131,072-token request outgrow the pool. The lever is listed as a
-- wrong one; the host must not count it (the goal stays unmet while it is
-- off its starting value) and must say so on the page, and the real flag
-- (a lower gpu-memory-utilization) must still win. Before levers had
-- classes, kvlab check failed here: "is met by the wrong lever --kv-heads 32".
return {
  id = 10, flags = { "kv-heads", "gpu-memory-utilization" },
  run = function(lab)
    assert(lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb" })
    lab.goal{ text = "Make vLLM refuse to start at the length check.",
              check = function() local p = lab.plan(); return p ~= nil and p.error_kind == "max_model_len" end,
              script = { { "gpu-memory-utilization", "0.25" } },
              wrong = { { { "kv-heads", "32" }, says = "Not counted for this goal: --kv-heads is a model override" } } }
  end,
}

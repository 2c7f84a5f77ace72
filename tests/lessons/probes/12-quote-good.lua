-- Quotes done right: the server's own error and log lines (the engine's
-- words for its release), a quote cut short with "...", and an older
-- release's wording where the page names that release.
return {
  id = 12, flags = {},
  run = function(lab)
    lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "rtx-4090" }
    local p = lab.plan()
    lab.say("vLLM refuses with:\n  %s", p.error)
    lab.say("It begins \"To serve at least one request ...\".")
    lab.say("vLLM 0.8.5 worded it \"To serve at least one request with the models's max seq len (131072)\".")
    lab.restart{ ["max-model-len"] = 8192 }
    for _, l in ipairs(lab.log()) do lab.say("  %s", l.text) end
    lab.pause()
  end,
}

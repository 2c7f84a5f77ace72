-- A page that quotes vLLM's length-check error in 0.8.5's words ("the
-- models's max seq len") while the server follows the newest release, which
-- says "the model's": kvlab check must stop at that lab.say (lsn_quote.c).
return {
  id = 11, flags = {},
  run = function(lab)
    lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "rtx-4090" }
    lab.say("vLLM refuses with:\n  To serve at least one request with the models's max seq len (131072), " ..
            "(16.00 GiB KV cache is needed, which is larger than the available KV cache memory")
    lab.pause()
  end,
}

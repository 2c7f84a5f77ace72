-- Fixture for the app tests: a goal reached in the flags view, then at once a
-- question (the learner's next keys must answer it, not edit a flag), whose
-- explanation is followed by a new page (it must stay readable until n).
return {
  id = 1,
  title = "Fixture: a goal, then a question",
  flags = { "max-model-len", "gpu-memory-utilization" },
  run = function(lab)
    lab.page("Break it")
    lab.show("flags")
    lab.show("log", { upto = "ready" })
    lab.highlight("log", "Model loading took")
    lab.start({ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb", ["max-model-len"] = 4096 })
    lab.say("The server runs with max-model-len 4096.")
    lab.goal{
      text = "Set max-model-len to 2048.",
      check = function() return lab.plan().max_model_len == 2048 end,
      hints = { "Select max-model-len, press Enter, type 2048." },
      script = { { "max-model-len", "2048" } },
    }
    lab.page("A question")
    lab.ask({ prompt = "How many tokens does one block hold?", answer = lab.plan().block_size, unit = "tokens",
              explain = "Each block of the pool holds block_size tokens, here the default of 16, for every layer at once.",
              hints = { "The default block size." }, script = tostring(lab.plan().block_size) })
    lab.page("After the answer")
    lab.say("A new page opened right after the answer.")
    lab.pause()
  end,
}

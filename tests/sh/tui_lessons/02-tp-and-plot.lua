-- Fixture for the app tests: a 70B model over two ranks (heads split), then
-- over sixteen (heads replicated), and a two-series plot.
return {
  id = 2,
  title = "Fixture: tensor parallel ranks and a plot",
  flags = { "tensor-parallel-size" },
  run = function(lab)
    lab.page("Two ranks")
    lab.show("tp")
    lab.show("memory")
    lab.show("plot")
    local ok, err = lab.start({ model = "meta-llama/Llama-3.1-70B-Instruct", gpu = "h100-80gb",
                                ["tensor-parallel-size"] = 2, quantization = "fp8", ["max-model-len"] = 8192 })
    if not ok then error("the fixture server should start: " .. tostring(err)) end
    lab.plot({ title = "work per token", xlabel = "tokens", ylabel = "tokens computed",
               series = { "with cache", "without cache" } })
    for n = 1, 40 do
      lab.plot_add(1, n * 16, 1)
      lab.plot_add(2, n * 16, n * 16)
    end
    lab.say("Heads split across two ranks.")
    lab.pause()
    lab.page("Sixteen ranks")
    lab.restart({ ["tensor-parallel-size"] = 16 })
    lab.say("More ranks than KV heads: copies.")
    lab.pause()
  end,
}

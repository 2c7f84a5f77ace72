-- lab.split with token counts past int32: 2^32 + 100 must not run as a
-- 100-token prompt (the count was cast, not checked).
return { id = 20, run = function(lab)
  lab.start({ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb" })
  local r, err = lab.split{ requests = { { prompt_tokens = (1 << 32) + 100, output_tokens = 10 } } }
  lab.say("split ran: %s %s", tostring(r and r.one.requests_finished), tostring(err))
end }

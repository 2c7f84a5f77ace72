-- lab.plot whose ylabel raises after title and xlabel were read (the C copies
-- of the first two leaked before); the error is caught, a thousand times.
return { id = 18, run = function(lab)
  local spec = setmetatable({ title = "t", xlabel = "x" }, { __index = function(_, k)
    if k == "ylabel" then error("no ylabel") end
  end })
  for _ = 1, 1000 do pcall(lab.plot, spec) end
  lab.plot(spec)
end }

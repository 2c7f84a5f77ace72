-- The refusal is swallowed, so the lesson goes on; no finalizer exists, so
-- leaving it (switch, quit) cannot hang.
return { id = 11, run = function(lab)
  local ok, err = pcall(setmetatable, {}, { __gc = function() while true do end end })
  lab.say("setmetatable with __gc: %s (%s)", tostring(ok), tostring(err))
  lab.pause()
end }

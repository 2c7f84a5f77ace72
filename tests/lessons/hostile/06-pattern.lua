return { id = 6, run = function(lab)
  local s = string.rep("a", 40)
  local p = string.rep("a?", 40) .. string.rep("a", 40)
  lab.say("found: %s", tostring(s:find(p)))
end }

return { id = 3, run = function(lab)
  setmetatable({}, { __gc = function() while true do end end })
  lab.pause()
end }

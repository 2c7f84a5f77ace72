return { id = 12, run = function(lab)
  xpcall(function() error("boom") end, function() while true do end end)
  lab.pause()
end }

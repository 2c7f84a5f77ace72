return { id = 2, run = function(lab)
  while true do
    pcall(function() while true do end end)
  end
end }

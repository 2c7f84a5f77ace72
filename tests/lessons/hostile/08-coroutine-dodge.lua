return { id = 8, run = function(lab)
  while true do
    coroutine.wrap(function() for _ = 1, 300 do end end)()
  end
end }

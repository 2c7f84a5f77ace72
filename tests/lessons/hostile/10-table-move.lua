return { id = 10, run = function(lab)
  table.move({}, 1, 1e15, 1)
end }

return { id = 9, run = function(lab)
  while true do
    pcall(function() local t = {} while true do t[#t + 1] = { 1, 2, 3 } end end)
  end
end }

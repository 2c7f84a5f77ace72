return { id = 1, run = function(lab)
  local t = {}
  while true do t[#t + 1] = { 1, 2, 3, 4, 5, 6, 7, 8 } end
end }

return { id = 7, run = function(lab)
  for _ = 1, 1000 do
    local v = lab.random(math.mininteger, math.maxinteger)
    assert(math.type(v) == "integer")
    local w = lab.random(math.maxinteger - 1, math.maxinteger)
    assert(w == math.maxinteger - 1 or w == math.maxinteger)
    local x = lab.random(math.mininteger, math.mininteger + 1)
    assert(x == math.mininteger or x == math.mininteger + 1)
  end
  error("random: every draw in range")
end }

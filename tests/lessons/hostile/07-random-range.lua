-- The whole integer range: no signed overflow (UBSan would stop), and the
-- draws spread over it instead of sticking at one end.
return { id = 7, run = function(lab)
  local pos, neg = 0, 0
  for _ = 1, 1000 do
    local v = lab.random(math.mininteger, math.maxinteger)
    assert(math.type(v) == "integer")
    if v > 0 then pos = pos + 1 elseif v < 0 then neg = neg + 1 end
    local w = lab.random(math.maxinteger - 1, math.maxinteger)
    assert(w == math.maxinteger - 1 or w == math.maxinteger)
    local x = lab.random(math.mininteger, math.mininteger + 1)
    assert(x == math.mininteger or x == math.mininteger + 1)
  end
  assert(pos > 300 and neg > 300, "lab.random(mininteger, maxinteger) does not spread over the range")
  error("random: every draw in range")
end }

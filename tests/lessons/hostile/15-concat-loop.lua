-- A 1 MiB string copied by `..` forever: each copy is one instruction.
return { id = 15, run = function(lab)
  local s = string.rep("x", (1 << 20) - 100)
  while true do local _ = s .. "y" end
end }

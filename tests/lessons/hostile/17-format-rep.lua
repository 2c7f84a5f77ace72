-- string.format and string.rep asked for far more than a string may hold.
return { id = 17, run = function(lab)
  local s = string.rep("x", (1 << 20) - 64)
  local ok = pcall(string.format, "%s%s%s", s, s, s)
  while true do local _ = string.rep("ab", 1 << 28) end
end }

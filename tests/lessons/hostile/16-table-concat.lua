-- table.concat of 100 strings of 1 MiB: one call would copy 100 MiB.
return { id = 16, run = function(lab)
  local t = {}
  for i = 1, 100 do t[i] = string.rep(string.char(64 + i % 26), (1 << 20) - 64) end
  local s = table.concat(t)
  return #s
end }

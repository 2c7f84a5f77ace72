-- The longest strings a lesson may have (just under 1 MiB), differing only at
-- the end, compared with `<` and `==` forever: each comparison reads them whole.
return { id = 14, run = function(lab)
  local s = string.rep("a", (1 << 20) - 64)
  local t = s:sub(1, -2) .. "b"
  local u = s:sub(1, -2) .. "a"
  while true do local _ = s < t, s == u end
end }

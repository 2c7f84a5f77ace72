-- Two 64 MB strings compared with `<` (strcoll: about a second each under
-- en_US.UTF-8, in one instruction no hook can break): the strings never get
-- that long.
return { id = 13, run = function(lab)
  local s = "a"
  while #s < (64 << 20) do s = s .. s end
  local t = s:sub(1, -2) .. "b"
  while true do local _ = s < t end
end }

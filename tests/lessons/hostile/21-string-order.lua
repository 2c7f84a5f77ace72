-- Strings compare byte by byte (LC_COLLATE is "C" for lessons in the app
-- and in kvlab check): under en_US.UTF-8 strcoll would put "a" before "B"
-- and cost a pass over both strings per comparison. Not hostile: it passes.
return { id = 21, run = function(lab)
  if not ("B" < "a" and "Z" < "a" and "a" < "b") then
    error("strings compare by the locale's collation, not byte by byte")
  end
  lab.say("string order: byte order (\"B\" < \"a\")")
  lab.pause()
end }

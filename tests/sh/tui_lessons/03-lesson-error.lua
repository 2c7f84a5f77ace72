-- Fixture for the app tests: a lesson that fails at run time; the app must
-- show the error in the text view and keep running.
return {
  id = 3,
  title = "Fixture: a lesson that fails",
  flags = {},
  run = function(lab)
    lab.page("About to fail")
    lab.say("The next step calls a function that does not exist.")
    lab.pause()
    local t = nil
    t.missing()
  end,
}

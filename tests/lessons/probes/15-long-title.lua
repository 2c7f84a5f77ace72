-- A page title longer than the text pane's border shows at 80 columns
-- (lesson 21's "Challenge 4/5: NCCL buffers at tp=2" read "...at tp~"):
-- kvlab check must stop at lab.page (lsn_lua.c, LSN_PAGE_TITLE_MAX).
return {
  id = 15, flags = {},
  run = function(lab)
    lab.page("Challenge 4/5: NCCL buffers at tp=2")
    lab.say("Cut at 80 columns.")
    lab.pause()
  end,
}

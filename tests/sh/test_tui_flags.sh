#!/usr/bin/env bash
# The flags view: f focuses it, left/right steps a value, Enter types one; each
# change restarts the lesson's server (and replays its start-up). Uses the
# fixture lessons in tests/sh/tui_lessons (a small pool under traffic).
. "$(dirname "$0")/tui_lib.sh"
LESSONS="$(cd "$(dirname "$0")" && pwd)/tui_lessons"

tui_start 120 30 "KVLAB_LESSONS_DIR=$LESSONS" -- --lesson 1
tui_wait "Lesson 1/3" 10
tui_wait "400 blocks" 10
tui_wait "gpu-memory-utilization" 5
tui_keys f
tui_wait "Esc: done" 5
tui_keys Down Left
tui_wait "gpu-memory-utilization = 0.91: server restarted" 5
# Type a value: Enter opens the value for editing.
tui_keys Down Down Down Enter BSpace BSpace BSpace BSpace 2 0 4 8 Enter
tui_wait "max-model-len = 2048: server restarted" 5
tui_wait "2048" 2
# A value the server refuses is reported, not applied.
tui_keys Up Up Enter BSpace BSpace BSpace BSpace BSpace BSpace x y z Enter
tui_wait "block-size" 2
s=$(tui_screen)
echo "$s" | grep -qiE "block.size.*(invalid|must|not|bad|choose|one of|expected)" || fail "no error for a bad block-size"
tui_keys Escape
tui_wait "f: edit" 5
# A mouse click on a flag selects it and gives the flags view the keys.
tui_click "enable-prefix-caching"
tui_wait "Esc: done" 5
tui_keys Right
tui_wait "enable-prefix-caching = false: server restarted" 5
tui_keys Escape
tui_wait "f: edit" 5
tui_quit_clean
echo "PASS"

#!/usr/bin/env bash
# Resize at any moment: 80x24 -> 200x60 (more room used) -> 60x20 (the
# "enlarge the terminal" screen, not a crash) -> 80x24 again; then quit clean.
. "$(dirname "$0")/tui_lib.sh"

tui_start 80 24 --
tui_wait "Lesson 1/" 10
tui_wait "q quit" 5

tui_resize 200 60
tui_wait "r reset" 5          # the footer has room for every key at 200 columns
s=$(tui_screen)
[ "$(echo "$s" | wc -l)" -ge 59 ] || fail "screen is not 60 rows after resize"
echo "$s" | awk 'length($0) > 150 { found = 1 } END { exit !found }' || fail "the app does not use 200 columns"

tui_resize 60 20
tui_wait "enlarge the terminal" 5
tui_wait_gone "? help" 5

tui_resize 80 24
tui_wait "q quit" 5
tui_wait "Lesson 1/" 5
tui_wait_gone "enlarge the terminal" 5

# A quick burst of resizes must not kill it either.
for sz in "100 30" "70 22" "81 25" "300 100" "20 10" "80 24"; do
    tui_resize $sz
    sleep 0.05
done
tui_wait "q quit" 5
tui_quit_clean
echo "PASS"

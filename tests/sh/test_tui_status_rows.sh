#!/usr/bin/env bash
# The status line at 80x24 says only what is true now: lesson 12's
# "Right: see the text view." after its first answer does not stay beside a
# miss on the next question (the page turned on the right answer, so the
# message was bound to the new page), and a message too long for the header
# ("Right: ..." does not fit beside the right end, "step N > held") is on the footer
# row whole.
. "$(dirname "$0")/tui_lib.sh"

tui_start 80 24 -- --lesson 12
tui_wait "One slab per request" 10
tui_advance_until "How many requests can hold a slab" 8
tui_keys -l "52"
tui_keys Enter
tui_wait "Right: see the text view." 10
tui_wait "holds no token at all?" 30
tui_keys -l "19"
tui_keys Enter
tui_wait "Hint:" 10
if tui_screen | grep -qF "Right: see the text view."; then fail "'Right' still shown after a wrong answer"; fi
tui_quit_clean
echo "PASS"

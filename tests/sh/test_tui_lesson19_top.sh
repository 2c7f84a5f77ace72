#!/usr/bin/env bash
# Lesson 19's first page opens at its top at 80x24: its last paragraph comes
# after the engine runs, and text added to a page follows to the end, so the
# lesson says the whole page after the run; the learner reads it from the
# first line, with "more below" and no "up" mark.
. "$(dirname "$0")/tui_lib.sh"

tui_start 80 24 -- --lesson 19
tui_wait "Lesson 19/" 10
tui_wait "n: next" 30       # the page is complete: the lesson waits for n
tui_wait "more below" 5
s=$(tui_screen)
printf '%s' "$s" | grep -qF "So far KV lived and died" || fail "the first page does not open at its top"
if printf '%s' "$s" | sed -n '2,24p' | cut -c1-40 | grep -q '↑'; then fail "the first page opens scrolled down"; fi
tui_quit_clean
echo "PASS"

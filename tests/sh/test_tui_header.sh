#!/usr/bin/env bash
# The header fits the page title at 80 columns: the right end says "held"
# (not "held by the lesson") and leaves out the speed at x1.0 when the long
# words would cut the title; a wide terminal keeps the long words, and a
# speed other than x1.0 is said.
. "$(dirname "$0")/tui_lib.sh"

title="A coding assistant on one H100"
tui_start 80 24 -- --lesson 1
tui_wait "$title" 10
tui_wait "held" 20
head1=$(tui_screen | head -1)
printf '%s' "$head1" | grep -qF "Lesson 1/21  $title" || fail "the title is cut in the header: '$head1'"
printf '%s' "$head1" | grep -qE "step [0-9]+ . held *$" || fail "the header's right end is not 'step N > held': '$head1'"
if printf '%s' "$head1" | grep -qF "x1.0"; then fail "the header says x1.0: '$head1'"; fi
tui_keys +
tui_wait "x1.5" 5
head1=$(tui_screen | head -1)
printf '%s' "$head1" | grep -qF "Lesson 1/21  $title" || fail "the title is cut beside the speed: '$head1'"
tui_quit_clean
tui_stop

tui_start 140 40 -- --lesson 1
tui_wait "held by the lesson" 20
head1=$(tui_screen | head -1)
printf '%s' "$head1" | grep -qF "Lesson 1/21  $title" || fail "the title is cut at 140 columns: '$head1'"
tui_quit_clean
echo "PASS"

#!/usr/bin/env bash
# Rewinding across runs (lessons/host/lsn_runs.h, tui/app/app_rewind.c), at
# 80x24 in lesson 16: the "Missed it? Press {" page must show the preemption
# it describes however the lesson got there -- the first time, after r (the
# lesson starts again: new engines, which may get the old ones' addresses),
# and after quitting and coming back (the lesson is replayed to its saved step
# without animation, the preemption inside that replay). m picks what { }
# jump to (named in the footer); one { must then land just before the
# victim's preemption, in the run that is live now, and the timeline keeps
# the earlier runs (its last step grows). The old app recorded only engines
# it saw at a new address after the lesson returned: after r it stayed on the
# first walk's runs, and after a resume it had no preemption at all.
. "$(dirname "$0")/tui_lib.sh"
export KVLAB_LESSONS_DIR="$KVLAB_SOURCE_DIR/lessons"

header() { tui_screen | sed -n 1p; }
footer() { tui_screen | tail -1; }
replay_of() { header | sed -nE 's/.*replay, step ([0-9]+) of ([0-9]+).*/\2/p'; }

tui_l16_answers

# m until the footer's { } names $1 (replay footer) or the status says it.
choose() {
    local i
    for i in $(seq 8); do
        tui_press m || true
        if tui_screen | grep -qE "(\{ \} $1 |previous / next $1)"; then return 0; fi
    done
    fail "m never chose '$1'"
}
# Tab until the flags view is on screen; $seqs: its max-num-seqs value.
seqs_row() {
    local i
    seqs=""
    for i in $(seq 8); do
        seqs=$(tui_screen | sed -n '/┌ flags/,/└/p' | sed -nE 's/.*│ max-num-seqs +([0-9]+).*/\1/p' | head -1)
        [ -n "$seqs" ] && return 0
        tui_press Tab || true
    done
}
# One { must land just before request $victim's preemption.
expect_preemption() {
    tui_keys '{'
    tui_wait "request #$victim is preempted" 5 || fail "$1: { did not land before request $victim's preemption"
    footer | grep -q "{ } preemption" || fail "$1: the footer does not name the kind { } jump to"
}

tui_start 80 24 -- --lesson 16
tui_wait "Lesson 16/" 10
tui_l16_to_preemption
choose preemption
expect_preemption "first walk"
m1=$(replay_of)
[ -n "$m1" ] || fail "no 'replay, step N of M' in the header"
# Home: the oldest step, the first run (max-num-seqs 4): the flags view
# shows that run's value (Tab gives it room and keeps the replay), End the
# live run's 16
tui_keys Home
tui_wait "replay, step 0 of" 5 || fail "Home did not go to step 0"
seqs_row
[ "$seqs" = 4 ] || fail "the first run's flags view says max-num-seqs '$seqs', not 4"
tui_keys End
tui_wait_gone "replay, step" 5 || fail "End did not return to the present"
seqs_row
[ "$seqs" = 16 ] || fail "the live flags view says max-num-seqs '$seqs', not 16"

# r: the lesson starts again; its new runs join the same timeline
tui_keys r
tui_wait "again from step 1?" 5 || fail "r did not ask"
tui_keys y
tui_wait "Lesson 16/" 10
tui_wait_gone "Missed it" 10
tui_l16_to_preemption
expect_preemption "after r"
m2=$(replay_of)
[ "$m2" -gt "$m1" ] || fail "after r the timeline ends at $m2, not past the first walk's $m1"
# m again: the restarts are marks too
choose restart
tui_keys '{'
tui_wait "next, the server restarts" 5 || fail "{ did not find a restart"
tui_keys End
tui_wait_gone "replay, step" 5

# quit and come back: the lesson is replayed to this page without animation
tui_quit_clean
tui_stop
tui_start 80 24 -- --lesson 16
tui_wait "Watch it happen" 60 || fail "the lesson did not resume on its page"
for i in $(seq 8); do # the resumed page opens at its top
    tui_screen | grep -q "Missed it? Press {" && break
    tui_press NPage || break   # the page's end: tui_l16_victim waits for it
done
tui_l16_victim
choose preemption
tui_keys '{'
tui_wait "request #$victim is preempted" 5 || fail "after a resume: { did not land before request $victim's preemption"
tui_keys End
tui_quit_clean
echo PASS

#!/usr/bin/env bash
# Rewinding the engine in the app (and lesson 16's prediction on the way) (tui/app/app_rewind.c on engine/kv_history.h),
# at 80x24, in lesson 16: after the first preemption of the "watch it happen"
# run, { returns to the step just before it and the pool and the victim's row
# show its blocks as they were then (running, a block table); ] plays that one
# step (the victim waits with no blocks, its freed blocks flash '!'); [ goes
# back; a key that changes something, and End, return to the present. That
# the replayed figures equal a fresh run stopped at that step is checked in
# the engine (tests/unit/test_history.c).
. "$(dirname "$0")/tui_lib.sh"
export KVLAB_LESSONS_DIR="$KVLAB_SOURCE_DIR/lessons"

header() { tui_screen | sed -n 1p; }
replay_step() { header | sed -nE 's/.*replay, step ([0-9]+) of ([0-9]+).*/\1 \2/p'; }
# the requests view's row of request $1 (right half of the screen)
req_row() { tui_screen | grep -oE "#$1 +[a-z!]+ +[0-9]+/[0-9]+ +tok.*" | head -1; }
pool_rows() { tui_screen | sed -n '/┌ block pool/,/└/p' | cut -c40-; }

tui_l16_answers
tui_start 80 24 -- --lesson 16
tui_wait "Lesson 16/" 10
tui_l16_to_preemption
live_header=$(header)

# { : back event by event (a few steps may have run after it) to the step
# just before the preemption
found=0
for i in $(seq 12); do
    tui_press '{' || true # (no change: the same step again)
    if header | grep -q "request #$victim is preempted"; then found=1; break; fi
done
[ $found = 1 ] || fail "{ did not land before request $victim's preemption"
read -r n m <<<"$(replay_step)"
[ -n "$n" ] && [ "$n" -lt "$m" ] || fail "replay step '$n' of '$m'"
tui_wait "End present" 3 || fail "the footer does not list the replay keys"
# select the victim's row (t cycles through the requests): it runs and holds blocks
for i in $(seq 64); do
    req_row "$victim" | grep -q . && break
    tui_press t || true
done
row=$(req_row "$victim")
grep -qE "#$victim +run +[0-9]+/[0-9]+ +tok +[0-9]+" <<<"$row" || fail "at step $n request $victim should run with blocks: '$row'"
pool_rows | grep -q '!' && fail "the pool flashes a preemption before it happened"
before_pool=$(pool_rows)

# ] : one step on, the preemption itself
tui_keys ']'
tui_wait "replay, step $((n + 1)) of $m" 5 || fail "] did not step to $((n + 1))"
victim_waits() { req_row "$victim" | grep -qE "#$victim +wait! +0/"; }
tui_until 5 victim_waits || fail "after the preemption request $victim should wait with nothing: '$(req_row "$victim")'"
flashes() { pool_rows | grep -q '!'; }
tui_until 5 flashes || fail "the victim's freed blocks do not flash"
# [ : back again, the same picture as before
tui_keys '['
tui_wait "replay, step $n of $m" 5 || fail "[ did not step back to $n"
same_pool() { [ "$(pool_rows)" = "$before_pool" ]; }
tui_until 5 same_pool || fail "step $n looks different the second time"
# Tab and scrolling only look: still replaying
tui_press Tab || fail "Tab did not move the focus"
header | grep -q "replay, step $n" || fail "Tab left the replay"

# End: the present, as it was
tui_keys End
tui_wait_gone "replay, step" 5 || fail "End did not return to the present"
tui_wait "Lesson 16/21" 5
# a key that acts returns to the present too: [ then n
tui_keys '['
tui_wait "replay, step $((m - 1)) of $m" 5 || fail "[ from the present"
tui_keys n
tui_wait_gone "replay, step" 5 || fail "n did not return to the present"
tui_quit_clean
echo PASS

#!/usr/bin/env bash
# Lessons 4 to 11 in the app, as a learner takes them: open the lesson, press
# n until its first check shows (a question or a goal), give a wrong answer
# and see the near-miss message or a hint, then give the answer kvlab check
# accepted (or make the flag change its goal asks for, in the flags view) and
# see the lesson take it. Answers and flag changes are read from
# `kvlab check N`, so the app and the headless run must agree on every figure.
. "$(dirname "$0")/tui_lib.sh"

LESSONS="$KVLAB_SOURCE_DIR/lessons"
export KVLAB_LESSONS_DIR="$LESSONS"

first_quoted() { grep -m1 -F "$1" <<<"$2" | sed -E "s/^[^']*'([^']*)'.*/\1/"; }
clear_box() { local i; for i in $(seq 40); do tui_keys BSpace; done; }

for n in 4 5 6 7 8 9 10 11; do
    out=$("$KVLAB" check "$n" --lessons "$LESSONS" --accounting textbook) || { echo "$out"; fail "kvlab check $n failed"; }
    first=$(grep -m1 -E '^  (question|goal) [0-9]+: ' <<<"$out")
    tui_start 120 40 -- --lesson "$n"
    tui_wait "Lesson $n/" 10
    # a prediction before the first check (lab.predict): give what kvlab check predicted
    pfirst=$(grep -m1 -E '^  (question|goal|prediction) [0-9]+: ' <<<"$out")
    if [[ $pfirst == "  prediction"* ]]; then
        tui_advance_until "type your prediction" 10
        tui_keys -l -- "$(first_quoted "predicted '" "$out")"; tui_keys Enter
        tui_wait "You predicted" 120 || fail "lesson $n: the prediction was not taken or the run did not end"
    fi
    if [[ $first == "  question"* ]]; then
        tui_advance_until ", Enter to" 10
        block=$(awk '/^  question 1: /{on=1} /^  (question|goal) 2: /{on=0} on' <<<"$out")
        wrong=$(first_quoted "refused '" "$block")
        right=$(first_quoted "accepted '" "$block")
        [ -n "$wrong" ] && [ -n "$right" ] || fail "lesson $n: no answers in kvlab check output"
        tui_keys -l -- "$wrong"; tui_keys Enter
        # a choice question explains the wrong pick; a number gets a hint or a near-miss note
        tui_wait "Hint:" 5 || fail "lesson $n: nothing shown after the wrong answer '$wrong'"
        clear_box
        tui_keys -l -- "$right"; tui_keys Enter
        tui_wait "Right" 10 || fail "lesson $n: the app refused '$right'"
    else
        tui_advance_until "Goal:" 10
        change=$(grep -m1 -E '^    set --' <<<"$out" | sed -E 's/^    set --([^ :]+) ([^:]*).*/\1 \2/')
        flag=${change%% *}; value=${change#* }
        # the flags view lists the lesson's flags in the order of its `flags`
        # table: move the selection down to the goal's flag
        file=$(ls "$LESSONS"/$(printf '%02d' "$n")-*.lua)
        list=$(grep -m1 -E '^  flags = \{' "$file" | grep -oE '"[^"]+"' | tr -d '"')
        idx=$(grep -nx -- "$flag" <<<"$list" | cut -d: -f1)
        [ -n "$idx" ] || fail "lesson $n: --$flag is not in the lesson's flags"
        tui_keys f
        tui_wait "Esc done" 5
        for _ in $(seq $((idx - 1))); do tui_keys Down; done
        tui_keys Enter; clear_box
        tui_keys -l -- "$value"; tui_keys Enter
        tui_wait "$flag = $value" 10 || fail "lesson $n: --$flag $value was not applied"
        tui_keys Escape
        # reached: the goal line leaves the text view and the lesson moves on
        tui_wait_gone "Goal: " 60 || fail "lesson $n: the goal was not reached after --$flag $value"
    fi
    tui_quit_clean
    tui_stop   # waits until the server is gone: the next tui_start must not race it
    echo "lesson $n: reached its first check in the app and passed it"
done
echo PASS

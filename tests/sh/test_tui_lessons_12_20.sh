#!/usr/bin/env bash
# Lessons 12 to 20 in the app, as a learner would take them: open the lesson,
# press n until its first check shows (a question or a goal), give a wrong
# answer and see a hint, then give the answer kvlab check accepted (or make
# the flag change its goal asks for) and see the lesson move on to its next
# check. The answers are read from `kvlab check N`, so the app and the
# headless run must agree on every figure.
. "$(dirname "$0")/tui_lib.sh"

LESSONS="$KVLAB_SOURCE_DIR/lessons"
export KVLAB_LESSONS_DIR="$LESSONS"

# first_quoted WORD TEXT: the first '...' after the first line containing WORD
first_quoted() { grep -m1 -F "$1" <<<"$2" | sed -E "s/^[^']*'([^']*)'.*/\1/"; }

# clear_box: empty a text box the app pre-fills (a flag's value, a wrong try)
clear_box() { local i; for i in $(seq 40); do tui_keys BSpace; done; }

for n in 12 13 14 15 16 17 18 19 20; do
    out=$("$KVLAB" check "$n" --lessons "$LESSONS") || { echo "$out"; fail "kvlab check $n failed"; }
    # the lesson's checks, in order: "  question 1: ..." / "  goal 1: ..."
    checks=$(grep -E '^  (question|goal) [0-9]+: ' <<<"$out")
    first=$(sed -n 1p <<<"$checks")
    second=$(sed -n 2p <<<"$checks" | sed -E 's/^  (question|goal) [0-9]+: ("?)//' | cut -c1-18)
    tui_start 120 40 -- --lesson "$n"
    tui_wait "Lesson $n/" 10
    if [[ $first == "  question"* ]]; then
        tui_advance_until ", Enter to" 8
        block=$(awk '/^  question 1: /{on=1} /^  (question|goal) 2: /{on=0} on' <<<"$out")
        wrong=$(first_quoted "refused '" "$block")
        right=$(first_quoted "accepted '" "$block")
        [ -n "$wrong" ] && [ -n "$right" ] || fail "lesson $n: no answers in kvlab check output"
        tui_keys -l -- "$wrong"; tui_keys Enter
        tui_wait "Hint:" 5 || fail "lesson $n: no hint after the wrong answer '$wrong'"
        clear_box
        tui_keys -l -- "$right"; tui_keys Enter
        tui_wait "Right" 10 || fail "lesson $n: the app refused '$right'"
    else
        tui_advance_until "Goal:" 8
        change=$(grep -m1 -E '^    set --' <<<"$out" | sed -E 's/^    set --([^ :]+) ([^:]*).*/\1 \2/')
        flag=${change%% *}; value=${change#* }
        # the goal's flag is the first one the lesson offers: edit it in place
        tui_keys f
        tui_wait "Esc done" 5
        tui_keys Enter; clear_box
        tui_keys -l -- "$value"; tui_keys Enter
        tui_wait "$flag = $value" 10 || fail "lesson $n: --$flag $value was not applied"
        tui_keys Escape
    fi
    if [ -n "$second" ]; then
        tui_advance_until "$second" 8 || fail "lesson $n: did not reach its next check ('$second')"
    fi
    tui_quit_clean
    tui_tmux kill-server
    echo "lesson $n: reached and passed its first check in the app"
done
echo PASS

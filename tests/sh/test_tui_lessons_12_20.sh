#!/usr/bin/env bash
# Lessons 12 to 20 in the app, taken to the end as a learner would: press n
# through the narration, give one wrong answer to the first question (a hint
# must follow), answer every question, make every goal's flag change in the
# flags view, and reach "Lesson complete.". The answers and flag changes are
# the ones `kvlab check N` used, so the app and the headless run must agree on
# every figure the lesson computes from its engine.
# KVLAB_TUI_LESSONS="12 16" limits the run to some lessons.
. "$(dirname "$0")/tui_lib.sh"

LESSONS="$KVLAB_SOURCE_DIR/lessons"
export KVLAB_LESSONS_DIR="$LESSONS"

quoted() { sed -E "s/^[^']*'([^']*)'.*/\1/"; }

# The step counter in the title bar ("step 7").
cur_step() { tui_screen | sed -n 1p | grep -oE 'step [0-9]+' | head -1 | grep -oE '[0-9]+'; }

# wait_step_after N [TIMEOUT_S]: the step counter moves past N (a check was
# passed); the deadline scales with TUI_TIMEOUT_SCALE like tui_wait's (ASan,
# two jobs at once: a goal's flag change restarts a server, 60 s was too
# little beside another test under ASan).
wait_step_after() {
    local before=$1 end=$((SECONDS + ${2:-20} * ${TUI_TIMEOUT_SCALE:-3})) s
    while [ $SECONDS -le $end ]; do
        s=$(cur_step || true)
        if [ -n "$s" ] && [ "$s" -gt "$before" ]; then return 0; fi
        sleep 0.1
    done
    fail "the lesson did not move past step $before"
}

for n in ${KVLAB_TUI_LESSONS:-12 13 14 15 16 17 18 19 20}; do
    out=$("$KVLAB" check "$n" --lessons "$LESSONS" --accounting textbook) || { echo "$out"; fail "kvlab check $n failed"; }
    # One action per line: "Q<TAB>prompt<TAB>wrong<TAB>answer" or "G<TAB>flag=value;flag=value"
    actions=$(awk '
        function flush() { if (kind == "Q") print "Q\t" prompt "\t" wrong "\t" right; else if (kind == "G") print "G\t" sets; else if (kind == "P") print "P\t" pred; kind = "" }
        /^  prediction [0-9]+: / { flush(); kind = "P"; pred = ""; next }
        kind == "P" && /^    predicted '\''/ { r = $0; sub(/^[^'\'']*'\''/, "", r); sub(/'\''.*/, "", r); pred = r }
        /^  question [0-9]+: / { flush(); kind = "Q"; prompt = $0; sub(/^  question [0-9]+: /, "", prompt); wrong = ""; right = ""; next }
        /^  goal [0-9]+: /     { flush(); kind = "G"; sets = ""; next }
        kind == "Q" && /^    refused '\''/ && wrong == "" { w = $0; sub(/^[^'\'']*'\''/, "", w); sub(/'\''.*/, "", w); wrong = w }
        kind == "Q" && /^    accepted '\''/ { r = $0; sub(/^[^'\'']*'\''/, "", r); sub(/'\''.*/, "", r); right = r }
        kind == "G" && /^    set --/ { s = $0; sub(/^    set --/, "", s); sub(/:.*/, "", s); split(s, kv, " "); sets = sets (sets == "" ? "" : ";") kv[1] "=" kv[2] }
        /^(PASS|FAIL) / { flush() }
    ' <<<"$out")
    [ -n "$actions" ] || fail "lesson $n: no checks found in kvlab check output"
    tui_start 120 40 -- --lesson "$n"
    tui_wait "Lesson $n/" 10
    first=1
    while IFS=$'\t' read -r kind a b c; do
        if [ "$kind" = P ]; then
            tui_advance_until "type your prediction" 12
            tui_keys -l -- "$a"; tui_keys Enter
            tui_wait "You predicted" 120 || fail "lesson $n: the prediction '$a' was not taken"
            continue
        fi
        if [ "$kind" = Q ]; then
            tui_advance_until ", Enter to" 12
            step=$(cur_step)
            if [ "$first" = 1 ] && [ -n "$b" ]; then
                tui_keys -l -- "$b"; tui_keys Enter
                tui_wait "Hint:" 5 || fail "lesson $n: no hint after the wrong answer '$b'"
                tui_keys C-u
            fi
            tui_keys -l -- "$c"; tui_keys Enter
            wait_step_after "$step" 30
        else
            tui_advance_until "Goal:" 12
            step=$(cur_step)
            IFS=';' read -ra sets <<<"$a"
            for kv in "${sets[@]}"; do tui_set_flag "${kv%%=*}" "${kv#*=}"; done
            wait_step_after "$step" 60
        fi
        first=0
    done <<<"$actions"
    tui_advance_until "Lesson complete." 12 || fail "lesson $n: did not complete"
    tui_quit_clean
    tui_stop   # waits until the server is gone: the next tui_start must not race it
    echo "lesson $n: completed in the app ($(wc -l <<<"$actions") checks)"
done
echo PASS

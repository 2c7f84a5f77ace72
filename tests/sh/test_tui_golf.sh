#!/usr/bin/env bash
# Golf in the playground (lesson 21): solving challenge 1 in the app says how
# ("Solved in 1 change with gpu, #N on the cheapest-first list (another
# card). The best is 1."), the score is kept in the progress file, survives a
# restart of the app (kvlab lessons lists it; the challenge's last hint then
# says "You solved this before in 1 change; the best is 1"), and a progress
# file with a malformed score is moved aside as any corrupt one is.
. "$(dirname "$0")/tui_lib.sh"
export KVLAB_LESSONS_DIR="$KVLAB_SOURCE_DIR/lessons"
P="$TUI_STATE/kvlab/progress.json"

solve_challenge_1() {
    tui_start 100 30 -- --lesson 21
    tui_wait "Lesson 21/" 10
    tui_advance_until "the length check" 6
    tui_keys f
    tui_wait "Esc: done" 5
    tui_keys Enter C-u r t x - 4 0 9 0 Enter
    tui_wait "Solved in 1 change with gpu" 20 || fail "no golf score after challenge 1"
}

solve_challenge_1
tui_screen | grep -q "The best" || fail "the score does not give the best"
tui_quit_clean
tui_stop
[ -f "$P" ] || fail "no progress file"
grep -q '"challenge 1"' "$P" || fail "the score is not in the progress file: $(cat "$P")"
out=$("$KVLAB" lessons)
grep -qE '^       challenge 1: best 1 change, gpu \(#[0-9]+ on the cheapest-first list: another card\)$' <<<"$out" \
    || fail "kvlab lessons does not list the score: $out"

# a restart: the score is still there, and the challenge's hints say so
tui_start 100 30 -- --lesson 21
tui_wait "Lesson 21/" 10
tui_keys r; tui_wait "again from step 1" 5; tui_keys y
tui_wait_gone "the length check" 10 || fail "the reset did not go back to the start"
tui_wait "Everything is yours now" 10
tui_advance_until "the length check" 6
for i in 1 2 3; do tui_press h || fail "h did not show hint $i"; done
tui_wait "Hint: You solved this before in 1 change" 5 || fail "no hint from the kept score"
tui_quit_clean
tui_stop
"$KVLAB" lessons | grep -q "challenge 1: best 1 change" || fail "the score did not survive a reset"

# a malformed score: the file is moved aside with a message, the list starts fresh
sed -i -E 's/"changes":[[:space:]]*1/"changes": "one"/' "$P"
err=$("$KVLAB" lessons 2>&1 >/dev/null)
grep -q 'moved it to' <<<"$err" || fail "a malformed score was not reported: $err"
ls "$TUI_STATE/kvlab" | grep -q '^progress.json.corrupt-' || fail "the corrupt file was not kept aside"
"$KVLAB" lessons | grep -q "challenge 1" && fail "a score was read from a corrupt file"
echo PASS

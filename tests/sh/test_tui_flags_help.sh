#!/usr/bin/env bash
# The flags view at 80x24 in plain ASCII without colour (tui/app/ui_flags.c),
# lesson 14: with the keys (f), the selected flag's whole help shows under
# the list, over as many rows as it takes (it was one row cut with '~'),
# and under it the `vllm serve` command of the flags as they stand, cut
# between options with " \" so it pastes into a shell: pasted into bash
# (with `vllm` standing for `kvlab`), it is a command kvlab serve takes. A
# flag the learner sets shows in it at once.
. "$(dirname "$0")/tui_lib.sh"
export KVLAB_LESSONS_DIR="$KVLAB_SOURCE_DIR/lessons"
fail() { echo "FAIL: $*" >&2; tui_screen >&2 || true; exit 1; }

# the flags box's rows, inside its border (the box is the right half)
flags_box() { tui_screen | sed -n '/+ flags /,/^+\|++-/p' | sed -nE 's/.*\|\| (.*) \|$/\1/p'; }
help_of() { "$KVLAB" serve --help 2>&1 | sed -nE "s/^  --$1 +(.*) \(default .*/\1/p" | head -1; }

tui_start 80 24 -- --ascii --no-color --lesson 14
tui_wait "Lesson 14/" 10
tui_advance_until "Flag 1/9" 12
tui_keys f
tui_wait "Esc: done" 5
# max-num-batched-tokens: a help longer than the pane is wide
names=$(flags_box | sed -nE 's/^([a-z][a-z0-9-]*) .*/\1/p')
idx=$(grep -nxF max-num-batched-tokens <<<"$names" | cut -d: -f1 | head -1)
[ -n "$idx" ] || fail "max-num-batched-tokens is not in the flags view"
for i in $(seq 12); do tui_keys Up; done
for i in $(seq $((idx - 1))); do tui_keys Down; done
tui_wait "max-num-batched-tokens      <" 5 || fail "could not select max-num-batched-tokens"
help=$(help_of max-num-batched-tokens)
[ ${#help} -gt 40 ] || fail "the help of --max-num-batched-tokens is short: '$help'"
want_words=$(awk '{print $(NF-1), $NF}' <<<"$help")
box=$(flags_box | tr -s ' ' | tr '\n' ' ')
grep -qF -- "$want_words" <<<"$box" || fail "the help's last words '$want_words' are not shown: $box"

# the command, as a shell reads it
cmd=$(flags_box | sed -n '/^vllm serve/,$p' | awk '{print} !/\\ *$/ {exit}' | sed -E 's/ +$//')
grep -q '^vllm serve' <<<"$cmd" || fail "no vllm serve command in the flags view"
grep -q 'meta-llama/Llama-3.1-8B-Instruct' <<<"$(tr -d '\\\n' <<<"$cmd")" || fail "the command names no model: $cmd"
run_pasted() {
    printf 'vllm() { shift; "$KVLAB" serve "$@" --gpu h100-80gb --accounting textbook --json; }\n%s\n' "$cmd" > "$TUI_TMP/paste.sh"
    KVLAB=$KVLAB bash "$TUI_TMP/paste.sh" > "$TUI_TMP/paste.out" 2>&1
}
run_pasted; rc=$?
[ $rc -le 1 ] || { cat "$TUI_TMP/paste.out" >&2; fail "the pasted command is refused (exit $rc): $cmd"; }

# a flag set shows in the command
# (tui_set_flag reads the box's UTF-8 border: set it by hand here)
idx=$(grep -nxF max-num-seqs <<<"$names" | cut -d: -f1 | head -1)
[ -n "$idx" ] || fail "max-num-seqs is not in the flags view"
for i in $(seq 12); do tui_keys Up; done
for i in $(seq $((idx - 1))); do tui_keys Down; done
tui_keys Enter C-u
tui_keys -l -- 64
tui_keys Enter
tui_wait "max-num-seqs = 64" 15 || fail "--max-num-seqs 64 was not applied"
tui_wait_gone "max-num-seqs = 64" 30 # the status message gives the row back to the help
cmd=$(flags_box | sed -n '/^vllm serve/,$p' | awk '{print} !/\\ *$/ {exit}' | sed -E 's/ +$//')
grep -q -- '--max-num-seqs 64' <<<"$cmd" || fail "--max-num-seqs 64 is not in the command: $cmd"
run_pasted; rc=$?
[ $rc -le 1 ] || { cat "$TUI_TMP/paste.out" >&2; fail "the pasted command is refused (exit $rc): $cmd"; }
grep -qE '"max_num_seqs":[[:space:]]*64,' "$TUI_TMP/paste.out" || fail "kvlab serve did not take --max-num-seqs 64"
grep -qE '"max_model_len":[[:space:]]*8192,' "$TUI_TMP/paste.out" || fail "kvlab serve did not take --max-model-len 8192"
echo "PASS"

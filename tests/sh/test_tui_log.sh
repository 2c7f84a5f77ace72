#!/usr/bin/env bash
# kvlab --log FILE at 80x24: the app opens on a real vLLM log (vLLM issue
# #10517's 29k run, V0 0.6.4 on an RTX 3090; the model given with --model,
# since the excerpt does not name it) with the memory bar and the start-up
# log of kvlab's plan for it, the log's figures beside the plan's (on the
# text page and as a second memory bar), and a flag change re-plans:
# max-model-len 20000 brings the KV cache to what the same issue's 20k run
# logged (3.81 GiB); v keeps a plan to set the next change beside. No
# progress file is written; the course folder made for the log is gone
# after quitting. Not a log: exit 2.
. "$(dirname "$0")/tui_lib.sh"
LOG="$KVLAB_SOURCE_DIR/tests/vectors/logs/vllm-10517-3090-l31-8b-29k.log"
export TMPDIR="$TUI_TMP"

tui_start 80 24 "KVLAB_DATA_DIR=$KVLAB_SOURCE_DIR" "TMPDIR=$TUI_TMP" -- --log "$LOG" --model meta-llama/Llama-3.1-8B-Instruct
tui_wait "Your log beside kvlab's plan" 15
tui_wait "GPU memory" 5
tui_wait "23.58 GiB x 0.90" 5                   # the logged card total and utilization, planned with
tui_wait "weights: 14.99 in your log, 14.99" 5
tui_wait "KV cache: 2.89 in your log, 2.90 in" 5
tui_wait "seq len (29000) is larger" 5          # kvlab's start-up log fails the length check as the log did
# The memory view holds two plans: the log's own figures (top bar) above
# kvlab's, a term that differs quoting the log's figure.
tui_wait "│ log   " 5
tui_wait "│ kvlab " 5
tui_wait "KV cache 2.90 (log 2.89)" 5
tui_set_flag max-model-len 20000
tui_wait "KV cache: 2.89 in your log, 3.82 in" 10
tui_wait "KV cache 3.82 (log 2.89)" 5               # the log's bar stays; kvlab's follows the flag
tui_wait "activation 2.06 (log 2.99)" 5
# v keeps kvlab's plan of the moment as the top bar: the next change is set
# beside it; v again brings the log's bar back.
tui_keys v
tui_wait "│ kept " 5
tui_wait "│ now  " 5
tui_set_flag max-model-len 16000
tui_wait "KV cache 4.24 (kept 3.82)" 10
tui_wait "activation 1.65 (kept 2.06)" 5
tui_keys v
tui_wait "│ log   " 5
tui_wait "KV cache 4.24 (log 2.89)" 5
# the help names the key, whole at 80 columns
tui_keys '?'
tui_wait "v             keep this plan as a second memory bar (v: drop it)" 5
tui_keys Escape
tui_wait_gone "keep this plan as a second" 5
ls "$TUI_TMP"/kvlab-log-* >/dev/null 2>&1 || fail "no course folder while running"
tui_quit_clean || exit 1
if ls "$TUI_TMP"/kvlab-log-* >/dev/null 2>&1; then fail "the course folder was left behind"; fi
if [ -e "$TUI_STATE/kvlab/progress.json" ]; then fail "--log wrote a progress file"; fi
tui_stop

# Not a vLLM log, or --log with a lesson: one line, exit 2, no screen.
printf 'hello\n' >"$TUI_TMP/not.log"
rc=0; out=$("$KVLAB" --log "$TUI_TMP/not.log" 2>&1 >/dev/null) || rc=$?
[ $rc = 2 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -q "not a vLLM log" <<<"$out" || fail "not a log: exit $rc: $out"
rc=0; out=$("$KVLAB" --log "$LOG" --lesson 3 2>&1 >/dev/null) || rc=$?
[ $rc = 2 ] && grep -q "drop --lesson" <<<"$out" || fail "--log with --lesson: exit $rc: $out"
exit 0

#!/usr/bin/env bash
# The layout rule at 80x24: what a page points at (a highlighted log line, a
# metric, a request's block table, a memory term) is on screen whole, even
# with several views sharing the right column.
#  - lesson 7, first page: vLLM's length-check error, highlighted in the log,
#    down to its last words, and the KV term of the memory bar;
#  - lesson 16, once the scheduler preempts: num_preemptions_total in the
#    metrics view beside the pool, requests and flags;
#  - lesson 13, after the switch to blocks: the highlighted request's row.
. "$(dirname "$0")/tui_lib.sh"
export KVLAB_LESSONS_DIR="$KVLAB_SOURCE_DIR/lessons"

tui_start 80 24 -- --lesson 7
tui_wait "The server will not start" 10
tui_wait "more details." 10 || fail "lesson 7: the highlighted error line is cut in the log view"
tui_wait "KV cache 2.83" 5 || fail "lesson 7: the highlighted KV term is not in the memory view"
tui_stop

# lesson 16: answer the first question, make it preempt, watch
tui_start 80 24 -- --lesson 16
tui_advance_until "type your prediction" 12
tui_keys -l -- "12"; tui_keys Enter
tui_advance_until ", Enter to" 12
tui_keys -l -- "2400"; tui_keys Enter
tui_advance_until "Goal:" 12
tui_set_flag max-num-seqs 16
tui_wait "Watch it happen" 60
tui_wait "num_preemptions_total" 10 || fail "lesson 16: num_preemptions_total is not on screen"
tui_stop

# lesson 13: the request the page names is on screen
id=$("$KVLAB" check -v 13 --accounting textbook | sed -nE 's/^Request ([0-9]+) is highlighted.*/\1/p' | head -1)
[ -n "$id" ] || fail "lesson 13: no highlighted request in kvlab check -v 13"
tui_start 80 24 -- --lesson 13
tui_advance_until ", Enter to" 12
tui_keys -l -- "15"; tui_keys Enter
tui_advance_until "Goal:" 12
tui_set_flag contiguous off
tui_wait "Request $id is highlighted" 60
tui_wait "#$id " 10 || fail "lesson 13: request #$id is not in the requests view"
tui_stop
echo PASS

#!/usr/bin/env bash
# kvlab check proves each answer: the probe lessons in tests/lessons/probes
# each break one rule, and the check must fail saying which: a literal answer
# the engine disagrees with, a numeric question without an expect, an expect
# that reads no engine figure, a wrong answer the checker cannot read, and a
# goal the engine reaches without the scripted change, a prediction whose run
# reports an outcome the engine disagrees with, a goal whose script changes the
# traffic (not a vllm serve flag). Probes 6 and 8 are done right and must
# pass; probe 10 lists a model override (kv-heads) that would meet its goal as
# a wrong lever: the host must not count it and must say so on the page.
# Probe 11 quotes vLLM's error in another release's words; probe 12 quotes
# the server's own lines, a cut quote and a named release's wording. Probe
# 13 shows one quantity at two precisions on one page; probe 14's near-miss
# reply says a figure went from a value to itself; probe 15's page title is
# cut at 80 columns; probe 16 sets a figure against itself ("B, not B").
set -uo pipefail
[ "${KVLAB_LESSONS:-1}" = "0" ] && exit 77
P="$KVLAB_SOURCE_DIR/tests/lessons/probes"
fail=0
expect() { # expect N rc pattern
  local n=$1 want=$2 pat=$3 out rc
  out=$("$KVLAB" check --lessons "$P" "$n" 2>&1); rc=$?
  echo "--- probe $n (exit $rc)"; echo "$out"
  if [ "$rc" -ne "$want" ]; then echo "FAIL: probe $n exit $rc, wanted $want"; fail=1; fi
  if ! grep -qE -- "$pat" <<<"$out"; then echo "FAIL: probe $n output lacks /$pat/"; fail=1; fi
}
expect 1 1 "FAIL question 1 .*the answer 99999 disagrees with the engine: kv_bytes_per_token = 131072"
expect 2 1 "FAIL question 1 .*has no expect"
expect 3 1 "FAIL question 1 .*its expect '131072' reads no engine figure"
expect 4 1 "FAIL question 1 .*the wrong answer 'lots' is unreadable"
expect 5 1 "FAIL goal 1 .*is reached without its scripted change: after [0-9]+ engine steps"
expect 6 0 "^PASS lesson 6 "
expect 6 0 "engine: 2 \* num_layers \* kv_heads_per_gpu \* head_size \* kv_dtype_bytes = 131072"
expect 6 0 "not reached in 100 engine steps without a change"
expect 7 1 "ERROR .*07-predict-wrong-outcome.lua:9: lab.predict: the run's outcome 4 requests disagrees with the engine: metrics.num_requests_waiting = 6 requests"
expect 8 0 "^PASS lesson 8 .*2 predictions"
expect 8 0 "outcome: engine metrics.num_requests_waiting = 6 \\(the run gave 6\\)"
expect 9 1 "FAIL goal 1 .*its script pulls --request-rate, which no goal counts unless its levers name it"
expect 10 0 "wrong lever --kv-heads 32: not reached, the page says \"Not counted for this goal: --kv-heads is a model override\""
expect 10 0 "^PASS lesson 10 "
expect 11 1 "ERROR .*11-quote-other-release.lua:8: lab.say: the page quotes \"To serve at least one request with the models's max seq len .*not how vLLM 0.33.0"
expect 12 0 "^PASS lesson 12 "
expect 13 1 "ERROR .*13-two-figures.lua:10: lab.say: the page shows [0-9.]+ GiB and [0-9.]+ GiB: the same figure at two precisions"
expect 14 1 "FAIL question 1 .*the reply to .*went from ([0-9.]+) to \\1: a move to the same figure is no move"
expect 15 1 "ERROR .*15-long-title.lua:7: lab.page: the title .* is 35 characters; 34 fit"
expect 16 1 "ERROR .*16-not-itself.lua:9: lab.say: the page says [0-9]+, not [0-9]+: a figure set against itself"
exit $fail

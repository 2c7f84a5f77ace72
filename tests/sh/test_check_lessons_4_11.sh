#!/usr/bin/env bash
# kvlab check 4..11: chapters 2 and 3 run headless to their end. Every
# question must refuse its wrong answers (the lesson's own, 10x the answer
# and every near-miss: GB vs GiB, the missing factor 2, attention heads
# instead of KV heads) and accept the scripted one, typed as a learner would
# from the course ("131,072 bytes", "10.7 GB"); every goal must hold only
# after its scripted flag changes. Under `kvlab check` each lesson also sets
# the course's figures beside the engine's (lib/expect.lua) and stops on a
# mismatch; this test asserts that every one of those comparisons ran. They
# are the seed article's figures, so it runs the textbook accounting
# (check_course_R runs every release).
set -euo pipefail
[ "${KVLAB_LESSONS:-1}" = "0" ] && exit 77
LESSONS=(4 5 6 7 8 9 10 11)
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
out=$(XDG_STATE_HOME="$state" KVLAB_LESSONS_DIR="$KVLAB_SOURCE_DIR/lessons" \
      "$KVLAB" check -v "${LESSONS[@]}" --accounting textbook 2>&1) || { echo "$out"; exit 1; }
echo "$out"
fail=0
for n in "${LESSONS[@]}"; do
    grep -q "^PASS lesson $n " <<<"$out" || { echo "FAIL: lesson $n did not pass"; fail=1; }
    block=$(awk -v n="$n" '$0 ~ "^lesson "n":" {on=1; next} /^lesson [0-9]+:/ {on=0} on' <<<"$out")
    grep -qE "refused|reached after" <<<"$block" || { echo "FAIL: lesson $n has no checked step"; fail=1; }
    grep -q "figure .* ok" <<<"$block" || { echo "FAIL: lesson $n compared no course figure"; fail=1; }
done
if grep -q "MISMATCH" <<<"$out"; then echo "FAIL: a course figure does not match"; fail=1; fi
# The course figures chapters 2 and 3 rest on, each compared at least once.
for fig in "8B KV bytes per token" "70B KV per token, bf16" "70B KV per token, fp8" \
           "32K conversation, bf16 (GB)" "32K conversation, fp8 (GB)" \
           "8K conversations, 8 KV heads" "8K conversations, 64 KV heads" "GQA / MHA conversations ratio" \
           "estimated maximum model length" "FP8 weights multiply the pool" "tp=16 equals tp=8" \
           "in flight = rate x lifetime" "queue with a full cache" "a tenth of the requests hold most"; do
    grep -q "figure  .*$fig.* ok" <<<"$out" || { echo "FAIL: figure '$fig' not compared"; fail=1; }
done
# The near-misses the issue names are explained, not just refused.
grep -q "refused '128 KB' .*KiB" <<<"$out" || { echo "FAIL: KB vs KiB not explained"; fail=1; }
grep -q "refused .*attention heads" <<<"$out" || { echo "FAIL: attention-vs-KV-heads not explained"; fail=1; }
grep -q "refused .*K and V" <<<"$out" || { echo "FAIL: the factor 2 not explained"; fail=1; }
grep -q "kvlab check: ${#LESSONS[@]} passed, 0 failed" <<<"$out" || fail=1
[ ! -e "$state/kvlab/progress.json" ] || { echo "FAIL: check wrote progress"; fail=1; }
exit $fail

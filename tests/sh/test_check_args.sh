#!/usr/bin/env bash
# kvlab check's command line: a lesson number the course does not have, or
# not a number at all, is bad input: one line on stderr, nothing run, exit 2
# (a lesson that runs and fails is exit 1; test_check_broken_lessons.sh).
set -uo pipefail
[ "${KVLAB_LESSONS:-1}" = "0" ] && exit 77
K=${KVLAB:?KVLAB not set}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
refused() { # refused WANT ARGS...: exit 2, stdout empty, stderr one line containing WANT
  local want=$1; shift
  "$K" check "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ $rc -ne 2 ] || [ -s "$tmp/out" ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -qF -- "$want" "$tmp/err"; then
    echo "FAIL: kvlab check $*: exit $rc, stdout '$(head -c 200 "$tmp/out")', stderr '$(cat "$tmp/err")' (want '$want')"
    fail=1
  fi
}
refused "kvlab check: no lesson 99: the course has lessons 1 to 21" 99
refused "no lesson 22: the course has lessons 1 to 21" 1 22      # nothing runs, lesson 1 neither
refused "kvlab check: '0' is not a lesson number" 0
refused "'abc' is not a lesson number" abc
refused "'' is not a lesson number" ""
refused "'3x' is not a lesson number" 3x
# the release: one kvlab knows, and an accounting that is release or textbook
refused "kvlab check: --vllm-version 9.9: unknown release" 1 --vllm-version 9.9
refused "--accounting takes release or textbook, not 'guess'" 1 --accounting guess
refused "kvlab check: --vllm-version needs a value" 1 --vllm-version
# a known release is the one every server follows, and the summary says which
"$K" check 4 --vllm-version 0.11.0 >"$tmp/out" 2>&1 || { echo "FAIL: kvlab check 4 --vllm-version 0.11.0: $(tail -3 "$tmp/out")"; fail=1; }
grep -qF "1 passed, 0 failed under vLLM 0.11.0" "$tmp/out" || { echo "FAIL: the summary does not name vLLM 0.11.0: $(tail -1 "$tmp/out")"; fail=1; }
"$K" check 4 --accounting textbook >"$tmp/out" 2>&1
grep -qF "under the textbook accounting" "$tmp/out" || { echo "FAIL: the summary does not name the textbook: $(tail -1 "$tmp/out")"; fail=1; }
exit $fail

#!/usr/bin/env bash
# The release set `kvlab check --vllm-version V` is run under in CI
# (tests/golden/lessons/RELEASES, one golden folder each) is the set that
# `kvlab check --help` and the README name, in that order.
set -uo pipefail
[ "${KVLAB_LESSONS:-1}" = "0" ] && exit 77
root=${KVLAB_SOURCE_DIR:?}
set_file=$(grep -vE '^(#|$)' "$root/tests/golden/lessons/RELEASES")
vers=$(grep -vx textbook <<<"$set_file" | tr '\n' ' ' | sed 's/ $//')
fail=0
"$KVLAB" check --help | tr -s ' \n' ' ' | grep -qF "RELEASES, $vers and textbook" ||
    { echo "FAIL: kvlab check --help does not name the set: $vers and textbook"; fail=1; }
for v in $vers; do
    [ -d "$root/tests/golden/lessons/$v" ] || { echo "FAIL: no golden transcripts for $v"; fail=1; }
    grep -qF "$v" "$root/README.md" || { echo "FAIL: README does not name $v"; fail=1; }
done
grep -q "textbook" <<<"$set_file" || { echo "FAIL: the textbook is not in the checked set"; fail=1; }
[ "$fail" -eq 0 ] && echo "PASS (the set: $vers and textbook)"
exit "$fail"

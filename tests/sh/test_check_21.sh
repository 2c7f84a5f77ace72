#!/usr/bin/env bash
# kvlab check 21: the playground runs headless; each of its five break-it
# challenges is out of reach before its scripted flag changes and reached
# after them; progress is never written.
set -euo pipefail
[ "${KVLAB_LESSONS:-1}" = "0" ] && exit 77
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
out=$(XDG_STATE_HOME="$state" KVLAB_LESSONS_DIR="$KVLAB_SOURCE_DIR/lessons" "$KVLAB" check 21)
echo "$out"
grep -q '^PASS lesson 21 ' <<<"$out"
[ "$(grep -c 'reached after' <<<"$out")" -eq 5 ]
grep -q 'max seq len' <<<"$out"            # 1: the length check
grep -q 'in the profile run' <<<"$out"     # 2: OOM while profiling
grep -q 'Free memory on device' <<<"$out"  # 4: fits at tp=1, not at tp=2
[ ! -e "$state/kvlab/progress.json" ]

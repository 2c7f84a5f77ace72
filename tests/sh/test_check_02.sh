#!/usr/bin/env bash
# kvlab check 2: lesson 2 runs headless to its end; its questions refuse their
# wrong answers and accept the scripted ones; progress is never written.
set -euo pipefail
[ "${KVLAB_LESSONS:-1}" = "0" ] && exit 77
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
out=$(XDG_STATE_HOME="$state" KVLAB_LESSONS_DIR="$KVLAB_SOURCE_DIR/lessons" "$KVLAB" check 2)
echo "$out"
grep -q '^PASS lesson 2 ' <<<"$out"
grep -q 'refused' <<<"$out"
[ ! -e "$state/kvlab/progress.json" ]

#!/usr/bin/env bash
# kvlab check 1: lesson 1 runs headless to its end; its question refuses the
# wrong answers and accepts the scripted one; progress is never written.
set -euo pipefail
[ "${KVLAB_LESSONS:-1}" = "0" ] && exit 77
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
out=$(XDG_STATE_HOME="$state" KVLAB_LESSONS_DIR="$KVLAB_SOURCE_DIR/lessons" "$KVLAB" check 1)
echo "$out"
grep -q '^PASS lesson 1 ' <<<"$out"
grep -q 'refused' <<<"$out"
[ ! -e "$state/kvlab/progress.json" ]

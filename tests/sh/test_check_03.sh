#!/usr/bin/env bash
# kvlab check 3: lesson 3 runs headless to its end: the learner turns the cache
# off (a goal), and its question refuses the
# wrong answers and accepts the scripted one; progress is never written.
set -euo pipefail
[ "${KVLAB_LESSONS:-1}" = "0" ] && exit 77
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
out=$(XDG_STATE_HOME="$state" KVLAB_LESSONS_DIR="$KVLAB_SOURCE_DIR/lessons" "$KVLAB" check 3)
echo "$out"
grep -q '^PASS lesson 3 ' <<<"$out"
grep -q "refused" <<<"$out"
grep -q "reached after" <<<"$out"
[ ! -e "$state/kvlab/progress.json" ]

#!/usr/bin/env bash
# kvlab lessons: the course in chapters with the learner's progress read from
# $XDG_STATE_HOME/kvlab/progress.json; a corrupt progress file is moved aside
# with a message and the list starts fresh.
set -euo pipefail
[ "${KVLAB_LESSONS:-1}" = "0" ] && exit 77
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
export XDG_STATE_HOME="$state" KVLAB_LESSONS_DIR="$KVLAB_SOURCE_DIR/lessons"

out=$("$KVLAB" lessons)
echo "$out"
grep -q '^1\. Why decode needs a cache' <<<"$out"
grep -q '^7\. Recap and playground' <<<"$out"
grep -qE '^ > 1  A coding assistant on one H100 +-$' <<<"$out"
grep -q '0 of 21 lessons done' <<<"$out"

mkdir -p "$state/kvlab"
cat > "$state/kvlab/progress.json" <<'JSON'
{"format_version": 1, "current": 2,
 "lessons": {"1": {"step": 9, "done": true, "inputs": []},
             "2": {"step": 3, "done": false, "inputs": []}}}
JSON
out=$("$KVLAB" lessons)
echo "$out"
grep -qE '^   1  A coding assistant on one H100 +done$' <<<"$out"
grep -qE '^ > 2  What each new token reads +at step 3$' <<<"$out"
grep -q '1 of 21 lessons done' <<<"$out"
grep -q 'resumes at lesson 2' <<<"$out"

echo '{"format_version": 1, "lessons": ' > "$state/kvlab/progress.json"
err=$("$KVLAB" lessons 2>&1 >/dev/null)
echo "$err"
grep -q 'moved it to' <<<"$err"
ls "$state/kvlab" | grep -q '^progress.json.corrupt-'
[ ! -e "$state/kvlab/progress.json" ]
out=$("$KVLAB" lessons 2>&1)
grep -q '0 of 21 lessons done' <<<"$out"

#!/usr/bin/env bash
# The golden transcripts of the course: tests/golden/lessons/NN.txt is what
# `kvlab check -v N` prints for lesson N (every page as the learner reads it,
# every answer tried, every engine figure an answer is checked against), with
# the run time left out. Any change of a figure or a text shows as a diff.
#
#   scripts/golden-lessons.sh [KVLAB]          rewrite the transcripts
#   scripts/golden-lessons.sh --check [KVLAB]  compare, exit 1 on a difference
#
# KVLAB defaults to build/kvlab. The host backend is used (the same figures on
# a GPU box) and no progress is read or written.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=write
if [ "${1:-}" = "--check" ]; then mode=check; shift; fi
kvlab=${1:-$root/build/kvlab}
[ -x "$kvlab" ] || { echo "golden-lessons: $kvlab is not a kvlab binary (build first)" >&2; exit 2; }
golden="$root/tests/golden/lessons"
mkdir -p "$golden"
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
export KVLAB_DEVICE=host KVLAB_LESSONS_DIR="$root/lessons" XDG_STATE_HOME="$state" LC_ALL=C
fail=0
count=$(grep -c '"file"' "$root/lessons/manifest.json")
for n in $(seq 1 "$count"); do
  name=$(printf '%02d.txt' "$n")
  # the run time is the only figure that changes from run to run
  out=$("$kvlab" check -v "$n" 2>&1 | sed -E 's/, [0-9]+\.[0-9]+ s\)$/)/')
  if [ "$mode" = write ]; then
    printf '%s\n' "$out" >"$golden/$name"
  elif ! diff -u "$golden/$name" <(printf '%s\n' "$out"); then
    echo "FAIL: lesson $n differs from tests/golden/lessons/$name (scripts/golden-lessons.sh rewrites it)"
    fail=1
  fi
done
if [ "$mode" = write ]; then
  echo "wrote $count transcripts to tests/golden/lessons/"
elif [ "$fail" = 0 ]; then
  echo "all $count lesson transcripts match tests/golden/lessons/"
fi
exit $fail

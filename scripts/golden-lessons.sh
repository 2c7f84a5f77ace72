#!/usr/bin/env bash
# The golden transcripts of the course, one folder per release the course is
# checked under (tests/golden/lessons/RELEASES: vLLM releases, and
# "textbook", the course's simplified arithmetic): tests/golden/lessons/R/NN.txt
# is what `kvlab check -v N --vllm-version R` (or `--accounting textbook`)
# prints for lesson N (every page as the learner reads it, every answer
# tried, every engine figure an answer is checked against), with the run
# time left out. Any change of a figure or a text shows as a diff.
#
#   scripts/golden-lessons.sh [--release R] [KVLAB]          rewrite the transcripts
#   scripts/golden-lessons.sh --check [--release R] [KVLAB]  compare, exit 1 on a difference
#
# Without --release: every release of RELEASES. KVLAB defaults to
# build/kvlab. The host backend is used (the same figures on a GPU box) and
# no progress is read or written.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=write
only=
while [ $# -gt 0 ]; do
  case "$1" in
    --check) mode=check; shift ;;
    --release) only=${2:?--release needs a release}; shift 2 ;;
    *) break ;;
  esac
done
kvlab=${1:-$root/build/kvlab}
[ -x "$kvlab" ] || { echo "golden-lessons: $kvlab is not a kvlab binary (build first)" >&2; exit 2; }
releases=${only:-$(grep -vE '^(#|$)' "$root/tests/golden/lessons/RELEASES")}
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
export KVLAB_DEVICE=host KVLAB_LESSONS_DIR="$root/lessons" XDG_STATE_HOME="$state" LC_ALL=C
fail=0
count=$(grep -c '"file"' "$root/lessons/manifest.json")
for rel in $releases; do
  golden="$root/tests/golden/lessons/$rel"
  mkdir -p "$golden"
  if [ "$rel" = textbook ]; then args=(--accounting textbook); else args=(--vllm-version "$rel"); fi
  for n in $(seq 1 "$count"); do
    name=$(printf '%02d.txt' "$n")
    # the run time is the only figure that changes from run to run
    out=$("$kvlab" check -v "$n" "${args[@]}" 2>&1 | sed -E 's/, [0-9]+\.[0-9]+ s\)( under .*)?$/)\1/')
    if [ "$mode" = write ]; then
      printf '%s\n' "$out" >"$golden/$name"
    elif ! diff -u "$golden/$name" <(printf '%s\n' "$out"); then
      echo "FAIL: lesson $n under $rel differs from tests/golden/lessons/$rel/$name (scripts/golden-lessons.sh --release $rel rewrites it)"
      fail=1
    fi
  done
  if [ "$mode" = write ]; then
    echo "wrote $count transcripts to tests/golden/lessons/$rel/"
  fi
done
if [ "$mode" = check ] && [ "$fail" = 0 ]; then
  echo "all lesson transcripts match tests/golden/lessons/ ($(echo $releases))"
fi
exit $fail

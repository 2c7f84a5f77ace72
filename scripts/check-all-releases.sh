#!/usr/bin/env bash
# Runs the whole course headless (kvlab check) under every vLLM release
# kvlab's accounting table knows, one release after another: a few seconds
# each, a few minutes in all, so it is not part of ctest (ctest checks the
# releases of tests/golden/lessons/RELEASES).
#
#   scripts/check-all-releases.sh [KVLAB] [-- RELEASE ...]
#
# The releases are the rows of engine/kv_release.c (kvlab does not print its
# table): the first release of each row and its last, the X.Y.99 ends that
# only close a range left out. Releases after `--` replace that list (for
# example every release whose source is at hand: -- $(ls DIR)). Prints one line
# per release; exit 0 when all pass, 1 when any fails (`kvlab check -v
# --vllm-version V` then shows why), 2 without a kvlab binary.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kvlab=$root/build/kvlab
if [ $# -gt 0 ] && [ "$1" != -- ]; then kvlab=$1; shift; fi
[ -x "$kvlab" ] || { echo "check-all-releases: $kvlab is not a kvlab binary (build first)" >&2; exit 2; }
if [ "${1:-}" = -- ]; then
  shift
  releases=("$@")
else
  mapfile -t releases < <(awk '/^static const kv_release ROWS\[\]/,/^};/' "$root/engine/kv_release.c" |
    grep -oE '^[[:space:]]*\{"[0-9][^"]*", "[^"]*"' | grep -oE '"[^"]*"' | tr -d '"' |
    grep -vE '\.99$' | awk '!seen[$0]++')
fi
[ ${#releases[@]} -gt 0 ] || { echo "check-all-releases: no releases found" >&2; exit 2; }
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
export KVLAB_DEVICE=host KVLAB_LESSONS_DIR="$root/lessons" XDG_STATE_HOME="$state" LC_ALL=C
failed=()
for rel in "${releases[@]}"; do
  if out=$("$kvlab" check --vllm-version "$rel" 2>&1); then
    echo "ok   $rel: ${out##*$'\n'}"
  else
    echo "FAIL $rel: ${out##*$'\n'}"
    failed+=("$rel")
  fi
done
echo "check-all-releases: ${#releases[@]} releases, ${#failed[@]} failed${failed[*]:+: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]

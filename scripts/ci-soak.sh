#!/usr/bin/env bash
# ci-soak.sh: does CI hold under load? Clones the repository cleanly and runs
# .ci/run (the whole of CI: build, ctest, ASan ctest, fuzzers) N times in a
# row while CPU-bound jobs run beside it, then reports each run's result,
# its wall time and what failed. Exit 0 when every run passed, 1 when one
# failed, 2 for bad usage.
#
#   scripts/ci-soak.sh [-n RUNS] [--hogs K] [--repo PATH] [--ref REF]
#                      [--fresh] [--timeout S] [--stop] [--dir DIR] [--keep]
#
#   -n RUNS      runs of .ci/run (default 5)
#   --hogs K     CPU-bound jobs beside each run (default 1; 0 for none):
#                each a shell busy loop at normal priority, started before
#                the run and ended after it
#   --repo PATH  repository to clone (default: the one this script is in)
#   --ref REF    commit, branch or tag to test (default: its HEAD)
#   --fresh      a new clone for every run (default: one clone, its build
#                folders kept between runs, as on one CI machine)
#   --timeout S  a run still going after S seconds counts as failed (default
#                7200)
#   --stop       stop at the first failed run
#   --dir DIR    where the clone and logs go (default: a new folder in
#                ${TMPDIR:-/tmp}); the logs are DIR/run-N.log
#   --keep       keep the clone and logs even when every run passed
#
# .ci/run calls scripts/deps.sh, which installs packages with apt-get: run
# this where that is allowed (a CI machine, a container of your own).
set -uo pipefail

runs=5 hogs=1 repo="" ref="" fresh=0 limit=7200 stop=0 dir="" keep=0
usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
    -n) runs=${2:-}; shift 2 ;;
    --hogs) hogs=${2:-}; shift 2 ;;
    --repo) repo=${2:-}; shift 2 ;;
    --ref) ref=${2:-}; shift 2 ;;
    --fresh) fresh=1; shift ;;
    --timeout) limit=${2:-}; shift 2 ;;
    --stop) stop=1; shift ;;
    --dir) dir=${2:-}; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) usage ;;
    *) echo "ci-soak.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
    esac
done
for v in runs hogs limit; do
    [[ ${!v} =~ ^[0-9]+$ ]] || { echo "ci-soak.sh: $v must be a whole number, got '${!v}'" >&2; exit 2; }
    [ "$v" = hogs ] || [ "${!v}" -ge 1 ] || { echo "ci-soak.sh: $v must be at least 1" >&2; exit 2; }
done
[ -n "$repo" ] || repo=$(cd "$(dirname "$0")/.." && pwd)
git -C "$repo" rev-parse --git-dir >/dev/null 2>&1 || { echo "ci-soak.sh: $repo is not a git repository" >&2; exit 2; }
commit=$(git -C "$repo" rev-parse --verify "${ref:-HEAD}^{commit}" 2>/dev/null) ||
    { echo "ci-soak.sh: no commit '${ref:-HEAD}' in $repo" >&2; exit 2; }
[ -n "$dir" ] || dir=$(mktemp -d "${TMPDIR:-/tmp}/kvlab-soak.XXXXXX")
mkdir -p "$dir" || exit 2

hog_pids=()
stop_hogs() {
    local p
    for p in "${hog_pids[@]+"${hog_pids[@]}"}"; do kill "$p" 2>/dev/null; done
    for p in "${hog_pids[@]+"${hog_pids[@]}"}"; do wait "$p" 2>/dev/null; done
    hog_pids=()
}
trap 'stop_hogs' EXIT
trap 'stop_hogs; exit 130' INT TERM

# A clean clone of the commit (no build folders, nothing untracked).
clone() {
    local to=$1
    rm -rf "$to"
    git clone --quiet --no-checkout "$repo" "$to" && git -C "$to" checkout --quiet --detach "$commit"
}

echo "ci-soak: $runs run(s) of .ci/run at $(git -C "$repo" log -1 --format='%h %s' "$commit" | cut -c1-70)"
echo "ci-soak: $hogs CPU-bound job(s) beside each run, $(nproc) CPU(s), logs in $dir"
src="$dir/src"
[ "$fresh" = 1 ] || clone "$src" || { echo "ci-soak.sh: cannot clone $repo" >&2; exit 1; }
passed=0 failed=0
results=()
for i in $(seq 1 "$runs"); do
    if [ "$fresh" = 1 ]; then clone "$src" || { echo "ci-soak.sh: cannot clone $repo" >&2; exit 1; }; fi
    log="$dir/run-$i.log"
    for _ in $(seq 1 "$hogs"); do
        (trap 'exit 0' TERM; while :; do :; done) &
        hog_pids+=($!)
    done
    t0=$(date +%s)
    (cd "$src" && timeout --kill-after=30 "$limit" .ci/run) >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    stop_hogs
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1)); what="pass"; why=""
    else
        failed=$((failed + 1)); what="FAIL"
        # ctest's list of failed tests, a fuzzer's crash, or the log's end
        why=$(sed -n '/The following tests FAILED/,/^Errors while running/p' "$log" | grep -E '^\s+[0-9]+ - ' |
              sed -E 's/^\s+[0-9]+ - //' | paste -sd ';' | sed 's/;/; /g')
        [ -n "$why" ] || why=$(grep -m1 -E '== .* found a crash' "$log")
        [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && why="timed out after ${limit}s${why:+; $why}"
        [ -n "$why" ] || why="exit $rc: $(tail -n 1 "$log" | cut -c1-100)"
    fi
    line=$(printf 'run %d/%d: %s in %dm%02ds%s' "$i" "$runs" "$what" $((secs / 60)) $((secs % 60)) "${why:+ ($why)}")
    results+=("$line")
    echo "$line"
    if [ "$rc" -ne 0 ] && [ "$stop" = 1 ]; then break; fi
done
echo "ci-soak: $passed passed, $failed failed of $((passed + failed)) run(s)"
if [ "$failed" -eq 0 ] && [ "$keep" = 0 ]; then
    rm -rf "$dir"
else
    echo "ci-soak: logs kept in $dir"
fi
[ "$failed" -eq 0 ]

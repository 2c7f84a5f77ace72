#!/usr/bin/env bash
# Runs every test: the normal build, the ASan+UBSan build, and the fuzzers.
# FUZZ_SECONDS per libFuzzer target (default: 270 s shared among them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
jobs=$(nproc)
# ctest runs one CPU-bound test per core ("cpu" slots) and, beside them, one
# tmux test ("tui" slot): those mostly wait on the screen (tests/CMakeLists.txt).
resources() {
  mkdir -p "$1"
  printf '{"version":{"major":1,"minor":0},"local":[{"cpu":[{"id":"0","slots":%d}],"tui":[{"id":"0","slots":1}]}]}\n' \
    "$jobs" >"$1/ctest-resources.json"
  echo "$PWD/$1/ctest-resources.json"
}

echo "== build (warnings are errors here) =="
# The kvlab: lines say whether the CUDA backend is built (it is wherever nvcc is).
cmake --preset default -DCMAKE_C_FLAGS="-Werror" -DCMAKE_CUDA_FLAGS="-Xcompiler=-Werror" | grep -E '^-- kvlab:'
cmake --build --preset default -j"$jobs"
echo "== tests =="
ctest --preset default -j"$((jobs + 1))" --resource-spec-file "$(resources build)"

echo "== ASan + UBSan build and tests =="
cmake --preset asan >/dev/null
cmake --build --preset asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --preset asan -j"$((jobs + 1))" --resource-spec-file "$(resources build-asan)"

echo "== fuzzers =="
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j"$jobs"
# The fuzz phase gets about 4.5 minutes in all, shared by the targets.
fuzzers=(build-fuzz/tests/fuzz_*)
secs=${FUZZ_SECONDS:-$(( 270 / ${#fuzzers[@]} ))}
for f in "${fuzzers[@]}"; do
  [ -x "$f" ] || continue
  name=$(basename "$f")
  corpus="build-fuzz/corpus-$name"
  mkdir -p "$corpus"
  seeds="tests/fuzz/corpus/${name#fuzz_}"
  [ -d "$seeds" ] && cp -r "$seeds"/. "$corpus"/
  dict=()
  [ -f "tests/fuzz/${name#fuzz_}.dict" ] && dict=(-dict="tests/fuzz/${name#fuzz_}.dict")
  echo "-- $name for ${secs}s"
  if ! "$f" -max_total_time="$secs" -print_final_stats=0 -artifact_prefix="build-fuzz/" "${dict[@]}" "$corpus" \
      >"build-fuzz/$name.log" 2>&1; then
    tail -n 60 "build-fuzz/$name.log"
    echo "== $name found a crash (input saved under build-fuzz/) ==" >&2
    exit 1
  fi
  tail -n 2 "build-fuzz/$name.log"
done
echo "== all tests passed =="

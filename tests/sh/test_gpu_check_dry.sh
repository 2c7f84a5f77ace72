#!/usr/bin/env bash
# tests/gpu/check.sh without a GPU, against stand-ins (tests/gpu/fake/): an
# nvidia-smi for an H200 and, for the full flow, a kvlab with canned answers.
# Through a pipe (`| tee`) the script must return within seconds of its own
# end (no orphaned watchdog holding stdout), write its JSON, and:
#   - with the real kvlab and no card that opens: stop after the driver
#     check with one reason ("the card cannot be opened: ...");
#   - with a driver too old for the CUDA kvlab is built with: stop first;
#   - with an nvidia-smi that cannot talk to a driver: SKIP (77);
#   - the full flow: every section in the JSON, the shared-card note read
#     from simulate's JSON, a bench that did not run said as such.
set -u
K=${KVLAB:?KVLAB not set}
SRC=${KVLAB_SOURCE_DIR:?KVLAB_SOURCE_DIR not set}
CHECK=$SRC/tests/gpu/check.sh
FAKE=$SRC/tests/gpu/fake
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
unset KVLAB_DEVICE CUDA_VISIBLE_DEVICES OUT
export NVIDIA_SMI=$FAKE/nvidia-smi KVLAB_CHECK_HARD_S=240

# dry NAME args...: runs check.sh through tee; sets RC, WALL (the pipe's
# seconds) and J (its JSON). The script's own elapsed_s is in the JSON.
dry() {
  local name=$1; shift
  J=$tmp/$name.json
  local t0 t1
  t0=$(date +%s.%N)
  timeout 200 bash "$CHECK" --json "$J" "$@" 2>&1 | tee "$tmp/$name.log" >/dev/null
  RC=${PIPESTATUS[0]}
  t1=$(date +%s.%N)
  WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  [ -s "$J" ] || fail "$name: no JSON written (exit $RC): $(tail -n 5 "$tmp/$name.log")"
  python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$J" || fail "$name: the JSON does not parse: $(cat "$J")"
  local own
  own=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["elapsed_s"])' "$J")
  awk -v w="$WALL" -v o="$own" 'BEGIN { exit !(w - o < 8) }' ||
    fail "$name: the pipe returned ${WALL} s after the start, the script ended at ${own} s (a process outlived it)"
}
jf() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$J" "$1"; }

# 1. The real kvlab, no card that opens here: one reason, nothing after it.
dry nocard --kvlab "$K" --no-build
[ "$RC" = 1 ] || fail "nocard: exit $RC, want 1: $(cat "$tmp/nocard.log")"
[ "$(grep -c '^STOP: ' "$tmp/nocard.log")" = 1 ] || fail "nocard: want one STOP line: $(cat "$tmp/nocard.log")"
grep -q '^STOP: the card cannot be opened: ' "$tmp/nocard.log" || fail "nocard: $(grep STOP "$tmp/nocard.log")"
! grep -Eq '^(FAIL|NOT-RUN) ' "$tmp/nocard.log" || fail "nocard: failures after the stop: $(grep -E '^(FAIL|NOT-RUN)' "$tmp/nocard.log")"
grep -q '^  needs: .*R580' "$tmp/nocard.log" || fail "nocard: the machine's needs are not said up front"
[ "$(jf 'd["status"]')" = stopped ] || fail "nocard: status $(jf 'd["status"]')"
[ "$(jf 'd["section"]')" = device ] || fail "nocard: stopped in section $(jf 'd["section"]')"
jf 'd["stopped"]' | grep -q '^the card cannot be opened: ' || fail "nocard: stopped '$(jf 'd["stopped"]')'"

# 2. A driver too old for CUDA 13: said first, before anything runs.
mkdir -p "$tmp/pre"
ln -s "$K" "$tmp/pre/kvlab"
echo "built with CUDA 13.0 (needs a driver for CUDA 13.0 or newer)" >"$tmp/pre/BUILT-WITH"
FAKE_SMI=old dry old --kvlab "$tmp/pre/kvlab" --no-build
[ "$RC" = 1 ] || fail "old: exit $RC"
grep -q '^STOP: the NVIDIA driver 570.124.06 supports CUDA 12.8; .* CUDA 13.0 .*R580 or newer' "$tmp/old.log" ||
  fail "old driver: $(grep -E 'STOP|PASS|FAIL' "$tmp/old.log")"
[ "$(jf 'd["section"]')" = build ] || fail "old: stopped in section $(jf 'd["section"]')"

# 3. nvidia-smi that cannot talk to a driver: no GPU here, 77.
FAKE_SMI=broken dry broken --kvlab "$K" --no-build
[ "$RC" = 77 ] || fail "broken: exit $RC, want 77"
grep -q "^SKIP: no NVIDIA GPU here .*couldn't communicate" "$tmp/broken.log" || fail "broken: $(cat "$tmp/broken.log")"
[ "$(jf 'd["status"]')" = skipped ] || fail "broken: status $(jf 'd["status"]')"

# 4. The whole flow with the stand-in kvlab.
dry full --kvlab "$FAKE/kvlab" --no-build
[ "$RC" = 1 ] || fail "full: exit $RC (the stand-in's int8 gather fails it): $(cat "$tmp/full.log")"
grep -q '^NOT-RUN gather-int8: did not run: gather bench: stand-in failure' "$tmp/full.log" ||
  fail "full: the int8 gather that did not run: $(grep int8 "$tmp/full.log")"
! grep -q 'read back wrong' "$tmp/full.log" || fail "full: a bench that did not run read as 'read back wrong'"
grep -q '^PASS shared-card: .*both ranks on one card: scaled by 0.500' "$tmp/full.log" ||
  fail "full: the shared-card note in simulate's JSON: $(grep shared-card "$tmp/full.log")"
grep -q '^PASS serve-footprint: ' "$tmp/full.log" || fail "full: $(grep serve-footprint "$tmp/full.log")"
grep -q '^PASS hold: ' "$tmp/full.log" || fail "full: $(grep hold "$tmp/full.log")"
grep -q '^PASS verify-bfloat16: .* of the read rate' "$tmp/full.log" || fail "full: verify against the read roofline: $(grep verify-bf "$tmp/full.log")"
grep -q '^PASS oom: ' "$tmp/full.log" || fail "full: $(grep oom "$tmp/full.log")"
grep -q '^INFO unit-on-device: not built: no test_cuda' "$tmp/full.log" || fail "full: $(grep unit-on "$tmp/full.log")"
[ "$(jf 'd["status"]')" = failed ] && [ "$(jf 'd["section"]')" = finished ] || fail "full: status $(jf 'd["status"]') in $(jf 'd["section"]')"
[ "$(jf 'd["failures"]')" = 1 ] || fail "full: $(jf 'd["failures"]') failures, want 1: $(grep -E '^(FAIL|NOT-RUN)' "$tmp/full.log")"
[ "$(jf 'd["figures"]["write_roofline_bfloat16"]')" = 0.9 ] || fail "full: figures $(jf 'd["figures"]')"
echo ok

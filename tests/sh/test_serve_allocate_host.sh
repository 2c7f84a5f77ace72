#!/usr/bin/env bash
# kvlab serve --allocate on the host backend (no GPU): the report says the
# simulated card counts the held GiB while host memory keeps only the K/V
# fingerprints, and gives those real host bytes (8 per KV slot of every rank),
# in the text and as --json's device.host_memory_bytes.
set -u
K=${KVLAB:?KVLAB not set}
export KVLAB_DEVICE=host
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
for tp in 1 4; do
  M=meta-llama/Llama-3.1-8B-Instruct
  [ $tp = 4 ] && M=meta-llama/Llama-3.1-70B-Instruct
  S=(serve "$M" --gpu h100-80gb --tensor-parallel-size $tp --allocate --hold 0)
  timeout 60 "$K" "${S[@]}" >"$tmp/out" 2>"$tmp/err" || fail "tp $tp: exit $? $(cat "$tmp/err")"
  timeout 60 "$K" "${S[@]}" --json >"$tmp/j" 2>"$tmp/err" || fail "tp $tp --json: exit $?"
  read -r blocks host held card <<<"$(python3 -c '
import json, re, sys
d = json.load(open(sys.argv[1]))["device"]
card = re.search(r"a simulated ([0-9.]+) GiB card", d["device_name"]).group(1)
print(d["num_blocks"], d["host_memory_bytes"], "%.2f" % d["held_gib"], card)' "$tmp/j")"
  # 8 bytes per slot (16-token blocks), every rank: the host's real cost
  [ "$host" = $((blocks * 16 * 8 * tp)) ] || fail "tp $tp: host_memory_bytes $host, want $blocks x 16 x 8 x $tp"
  mib=$(awk -v b="$host" 'BEGIN { printf "%.2f", b / 1048576 }')
  grep -qF "the simulated $card GiB card$([ $tp = 1 ] || echo ' of each rank') counts $held GiB as held (placeholders and KV pool)" "$tmp/out" ||
    fail "tp $tp: no simulated-card line ($card GiB, $held held): $(grep -A2 'On the host' "$tmp/out")"
  grep -qF "host memory keeps only the K/V fingerprints: $mib MiB (8 bytes per KV slot" "$tmp/out" ||
    fail "tp $tp: no host-bytes line ($mib MiB): $(grep -A2 'On the host' "$tmp/out")"
  ! grep -q "bookkeeping" "$tmp/out" || fail "tp $tp: the old 'GiB of bookkeeping' wording"
done
echo ok

#!/usr/bin/env bash
# The differential test of kvlab's CPU tier (engine/kv_offload.c) against a
# reference model transcribed from vLLM's OffloadingConnector manager of
# each era (tests/vllm/offload/reference.py: 0.11-0.17, 0.18-0.30, the
# per-request ranks of 0.31-0.32 and the provisional ranks of 0.33): for
# each configuration below, gen_ops.py writes the manager calls the
# connector makes for a workload (touch, lookup, prepare_load,
# prepare_store, request finished), and kvlab (offload_replay) and the
# reference replay them; after every call both print its result (hits,
# blocks stored or -1) and the held block hashes in LRU order, and the two
# must agree line for line: the same store and load decisions, the same
# evictions, the same hit counts. Exit 77 without python3.
set -u
: "${OFFLOAD_REPLAY:?set OFFLOAD_REPLAY to the offload_replay binary}"
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# CAPACITY DOCS DOC_BLOCKS OWN_MAX CHUNK ACTIVE REQUESTS SEED
CONFIGS=(
  "64 4 8 4 4 2 60 1"       # everything fits after warm-up
  "16 4 8 4 4 2 60 2"       # thrashing: documents larger than the tier's share
  "32 8 6 6 3 3 80 3"
  "8 2 12 2 16 1 40 4"      # offers larger than the tier: refused whole, offered again
  "100 10 5 10 8 4 120 5"
  "24 3 8 0 16 1 50 6"      # whole requests in one offer
  "48 6 4 12 2 4 100 7"     # long own suffixes, small chunks
  "12 1 10 3 5 2 60 8"      # one hot document that nearly fills the tier
  "200 20 8 8 8 8 200 9"
  "30 5 5 5 1 6 90 10"      # one block per offer, many at once
  "5 3 3 2 2 2 40 11"       # a tiny tier
  "256 16 16 16 16 4 150 12"
  "10 2 6 6 8 3 60 13"      # offers near the tier's size, three requests at once
)
fail=0
# each configuration under every era's rules (gen_ops.py RULES): 0.11-0.17
# (0), 0.18-0.30 (1), 0.31-0.32 (2), 0.33 on (3)
for c in "${CONFIGS[@]/#/0 }" "${CONFIGS[@]/#/1 }" "${CONFIGS[@]/#/2 }" "${CONFIGS[@]/#/3 }"; do
  # shellcheck disable=SC2086
  python3 "$here/gen_ops.py" $c >"$tmp/ops" || { echo "FAIL: gen_ops $c"; fail=1; continue; }
  python3 "$here/reference.py" <"$tmp/ops" >"$tmp/ref" || { echo "FAIL: reference $c"; fail=1; continue; }
  "$OFFLOAD_REPLAY" <"$tmp/ops" >"$tmp/kvlab" || { echo "FAIL: offload_replay $c"; fail=1; continue; }
  calls=$(grep -vc '^C' "$tmp/ops")
  if ! cmp -s "$tmp/ref" "$tmp/kvlab"; then
    line=$(cmp "$tmp/ref" "$tmp/kvlab" | sed -n 's/.* line \([0-9]*\).*/\1/p')
    echo "FAIL: config '$c': first difference after call ${line:-?} of $calls"
    echo "  vLLM:  $(sed -n "${line:-1}p" "$tmp/ref" | cut -c1-200)"
    echo "  kvlab: $(sed -n "${line:-1}p" "$tmp/kvlab" | cut -c1-200)"
    fail=1
    continue
  fi
  echo "ok: config '$c': $calls calls agree ($(tail -1 "$tmp/ref"))"
done
exit $fail

#!/usr/bin/env bash
# Device checks for the CUDA backend (issue #4). Run on a machine with an
# NVIDIA GPU; prints one PASS/FAIL line per check and exits non-zero when one
# fails (77 = skipped: no GPU here). Takes well under 3 minutes.
#
#   tests/gpu/check.sh [path/to/kvlab]
#
# The binary defaults to build-engine/kvlab, build/kvlab, then ./kvlab. Not
# run by ctest: CI has the toolkit but no GPU. See tests/gpu/README.md.
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
KVLAB=${1:-}
if [ -z "$KVLAB" ]; then
  for c in "$root/build-engine/kvlab" "$root/build/kvlab" "./kvlab"; do
    [ -x "$c" ] && { KVLAB=$c; break; }
  done
fi
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "SKIP: nvidia-smi not found: this is not a GPU machine (the CUDA checks need one)"
  exit 77
fi
if [ -z "$KVLAB" ] || [ ! -x "$KVLAB" ]; then
  echo "FAIL setup: no kvlab binary (build one: cmake --preset engine-only && cmake --build --preset engine-only)"
  exit 1
fi
# The binary finds assets/ (models, GPU catalogue) through KVLAB_DATA_DIR.
export KVLAB_DATA_DIR=${KVLAB_DATA_DIR:-$root}
unset KVLAB_DEVICE
MODEL=${KVLAB_CHECK_MODEL:-meta-llama/Llama-3.1-8B-Instruct}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
pass() { echo "PASS $1: $2"; }
fail() { echo "FAIL $1: $2"; failures=$((failures + 1)); }

# First value of "key": in a cJSON-printed file (numbers, strings, booleans).
jget() {
  sed -n 's/^[[:space:]]*"'"$2"'":[[:space:]]*"\{0,1\}\([^",]*\)"\{0,1\},\{0,1\}[[:space:]]*$/\1/p' "$1" | head -n 1
}
# awk arithmetic: fcmp "a >= b"
fcmp() { awk "BEGIN { exit !($1) }"; }

# The card kvlab uses (CUDA device 0), named by PCI bus id once probe has
# read it: nvidia-smi's indices need not follow CUDA's order.
GPU_SEL=0
gpu_used_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "$GPU_SEL" 2>/dev/null | head -n 1 | tr -d ' '; }

echo "kvlab GPU checks: $KVLAB"
nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total,driver_version --format=csv,noheader | sed 's/^/  /'

# 1. probe -------------------------------------------------------------------
timeout 90 "$KVLAB" probe --json >"$tmp/probe.json" 2>"$tmp/probe.err"
rc=$?
name=$(jget "$tmp/probe.json" name)
bus=$(jget "$tmp/probe.json" pci_bus_id)
[ -n "$bus" ] && GPU_SEL=$bus
if [ $rc -eq 0 ] && [ -n "$name" ]; then
  pass probe "$name, cc $(jget "$tmp/probe.json" compute_capability), total $(jget "$tmp/probe.json" total_gib) GiB, free $(jget "$tmp/probe.json" free_gib) GiB, context $(jget "$tmp/probe.json" cuda_context_gib) GiB, pool alloc $(jget "$tmp/probe.json" pool_alloc_ms) ms"
else
  fail probe "exit $rc: $(head -c 400 "$tmp/probe.err")"
fi

# 2. serve the 8B model on this GPU with placeholders; nvidia-smi shows it ---
before=$(gpu_used_mib)
timeout 120 "$KVLAB" serve "$MODEL" --gpu this --allocate --hold 12 --json >"$tmp/serve.json" 2>"$tmp/serve.err" &
spid=$!
seen=""
for _ in $(seq 1 90); do
  if grep -q '"device"' "$tmp/serve.json" 2>/dev/null && grep -q '^}' "$tmp/serve.json"; then seen=1; break; fi
  kill -0 $spid 2>/dev/null || break
  sleep 1
done
sleep 2
during=$(gpu_used_mib)
apps=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null | awk -F', *' -v p=$spid '$1 == p { print $2 }')
wait $spid
src=$?
budget=$(jget "$tmp/serve.json" budget_gib)
allocated=$(jget "$tmp/serve.json" allocated)
if [ -z "$seen" ] || [ "$allocated" != "true" ]; then
  fail serve-footprint "serve --allocate exit $src: $(jget "$tmp/serve.json" error) $(head -c 300 "$tmp/serve.err")"
else
  # Per-process figure when nvidia-smi can see our pid (not in every container), else the card's delta.
  if [ -n "$apps" ]; then shown=$apps; how="process $spid"; else shown=$((during - before)); how="card used delta"; fi
  shown_gib=$(awk -v m="$shown" 'BEGIN { printf "%.2f", m / 1024 }')
  if fcmp "($shown_gib - $budget) < 1 && ($budget - $shown_gib) < 1"; then
    pass serve-footprint "$MODEL: nvidia-smi shows $shown_gib GiB ($how), plan budget $budget GiB (held $(jget "$tmp/serve.json" held_gib) GiB + context, $(jget "$tmp/serve.json" write_gbps) GB/s K/V write, $(jget "$tmp/serve.json" mismatches) mismatches)"
  else
    fail serve-footprint "nvidia-smi shows $shown_gib GiB ($how) but the plan's budget is $budget GiB"
  fi
fi

# 3 + 4. prefix sharing + preemption trace, verify every step; parity -------
timeout 120 "$KVLAB" probe --parity --json >"$tmp/parity.json" 2>"$tmp/parity.err"
rc=$?
steps=$(jget "$tmp/parity.json" trace_steps)
pre=$(jget "$tmp/parity.json" trace_preemptions)
hits=$(jget "$tmp/parity.json" trace_prefix_cache_hits)
vfail=$(jget "$tmp/parity.json" trace_verify_error)
if [ -n "$steps" ] && [ "${pre:-0}" -gt 0 ] && [ "${hits:-0}" -gt 0 ] && [ -z "$vfail" ]; then
  pass trace-verify "$steps steps on CUDA, gather-verify after every step: 0 mismatches; $pre preemptions, $hits prefix-cache hit tokens"
else
  fail trace-verify "exit $rc, steps ${steps:-?}, preemptions ${pre:-?}, hits ${hits:-?}: ${vfail:-$(head -c 300 "$tmp/parity.err")}"
fi
same=$(jget "$tmp/parity.json" parity_identical)
if [ "$same" = "true" ]; then
  pass parity "host and CUDA backends: identical block tables, $(jget "$tmp/parity.json" parity_events) events and metrics"
else
  fail parity "$(jget "$tmp/parity.json" parity_difference) $(head -c 300 "$tmp/parity.err")"
fi

# 5. write-kernel bandwidth on a large batch ------------------------------------
gbps=$(jget "$tmp/probe.json" write_gbps)
peak=$(jget "$tmp/probe.json" hbm_peak_gbps)
cc=$(jget "$tmp/probe.json" compute_capability)
if [ -z "$gbps" ]; then
  fail write-bandwidth "no figure (probe failed)"
elif [ -z "$peak" ] || fcmp "$peak <= 0"; then
  pass write-bandwidth "$gbps GB/s (no catalogue peak for this card to compare with)"
else
  pct=$(awk -v g="$gbps" -v p="$peak" 'BEGIN { printf "%.1f", 100 * g / p }')
  case "$cc" in
    9.*) if fcmp "$pct >= 80"; then pass write-bandwidth "$gbps GB/s = $pct% of the $peak GB/s HBM peak (goal 80% on Hopper)"
         else fail write-bandwidth "$gbps GB/s = $pct% of the $peak GB/s HBM peak (goal 80% on Hopper)"; fi ;;
    *) pass write-bandwidth "$gbps GB/s = $pct% of the $peak GB/s peak (the 80% goal is for Hopper; this is cc $cc)" ;;
  esac
fi

# 6. an intentional OOM, handled without a crash ------------------------------
timeout 60 "$KVLAB" probe --pool-gib 100000 >"$tmp/oom1.out" 2>&1
rc1=$?
timeout 60 "$KVLAB" serve "$MODEL" --gpu this --allocate --hold 0 --kv-cache-memory-bytes 100000G >"$tmp/oom2.out" 2>&1
rc2=$?
if [ $rc1 -eq 1 ] && [ $rc2 -eq 1 ] && grep -q "CUDA out of memory. Tried to allocate" "$tmp/oom1.out" &&
   grep -q "CUDA out of memory. Tried to allocate" "$tmp/oom2.out"; then
  pass oom "$(grep -o 'CUDA out of memory. Tried to allocate [^.]*\.[^.]*\.' "$tmp/oom2.out" | head -n 1) ... (probe exit $rc1, serve exit $rc2, no crash)"
else
  fail oom "probe exit $rc1, serve exit $rc2 (want 1 and 1 with a CUDA OOM message): $(tail -c 300 "$tmp/oom2.out")"
fi

# 7. test_cuda on the device, when the build has unit tests (needs cmocka) --
t=""
for c in "$(dirname "$KVLAB")/tests/test_cuda" "$root/build-engine/tests/test_cuda" "$root/build/tests/test_cuda"; do
  [ -x "$c" ] && { t=$c; break; }
done
if [ -n "$t" ]; then
  if KVLAB_SOURCE_DIR=$root timeout 120 "$t" >"$tmp/unit.out" 2>&1 && ! grep -q "no CUDA device here" "$tmp/unit.out"; then
    pass unit-on-device "$t: $(grep -c '\[       OK \]' "$tmp/unit.out") cmocka tests, real blocks in each dtype and host parity at tp 1 and 2"
  else
    fail unit-on-device "$t: $(grep -E 'FAILED|ERROR|error|no CUDA device here' "$tmp/unit.out" | head -n 3 | tr '\n' ' ')"
  fi
else
  echo "SKIP unit-on-device: no test_cuda binary beside kvlab (build with cmocka to get it)"
fi

if [ $failures -eq 0 ]; then echo "all GPU checks passed"; else echo "$failures GPU check(s) failed"; fi
[ $failures -eq 0 ]

#!/usr/bin/env bash
# Device checks for the CUDA backend: builds kvlab for the card it finds,
# then runs every device check once, in under 8 minutes on an H100/H200
# (timed here), printing one PASS/FAIL line per check with its figure, and
# writing the figures as JSON. Exit 0 when every check passed, 1 when one
# failed, 77 (one line) when this machine has no NVIDIA GPU.
#
#   tests/gpu/check.sh [--json FILE] [--kvlab PATH] [--no-build]
#
# --json FILE   where the figures go (default $OUT/gpu-check.json when $OUT
#               is set, else ./gpu-check.json)
# --kvlab PATH  a prebuilt kvlab (test_cuda beside it or in tests/ is used
#               too); without it, and when no CUDA toolkit is found to build
#               with, build-gpu-prebuilt/kvlab (tests/gpu/prebuild.sh makes it)
# --no-build    do not build even when a toolkit is found
#
# Environment: KVLAB_CHECK_MODEL (default meta-llama/Llama-3.1-8B-Instruct),
# KVLAB_CHECK_MIN_ROOFLINE (default 0.75: a kernel's share of the memset /
# memcpy rate measured in the same run), CUDA_VISIBLE_DEVICES (the card; on
# a MIG GPU, the slice). See tests/gpu/README.md.
set -u
T0=$(date +%s.%N)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
JSON=""
KVLAB=""
BUILD=1
while [ $# -gt 0 ]; do
  case "$1" in
    --json) JSON=${2:-}; shift 2 ;;
    --kvlab) KVLAB=${2:-}; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "check.sh: unknown argument '$1' (see --help)"; exit 2 ;;
  esac
done
[ -z "$JSON" ] && JSON=${OUT:+$OUT/gpu-check.json}
[ -z "$JSON" ] && JSON=./gpu-check.json
LIMIT_S=480
HARD_S=${KVLAB_CHECK_HARD_S:-570} # no run goes past this (a 600 s caller limit still gets the JSON)
MODEL=${KVLAB_CHECK_MODEL:-meta-llama/Llama-3.1-8B-Instruct}
MINROOF=${KVLAB_CHECK_MIN_ROOFLINE:-0.75}

# ---- is there a GPU? ---------------------------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "SKIP: no NVIDIA GPU here (nvidia-smi not found): the device checks need one"
  exit 77
fi
if ! smi_l=$(nvidia-smi -L 2>&1) || ! printf '%s\n' "$smi_l" | grep -q '^GPU '; then
  echo "SKIP: no NVIDIA GPU here (nvidia-smi -L: $(printf '%s' "$smi_l" | head -n 1))"
  exit 77
fi

tmp=$(mktemp -d)
watch_pids=""
cleanup() {
  for p in $watch_pids; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
checks_json=""
figures_json=""
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
jstr() { printf '"%s"' "$(printf '%s' "$1" | tr -d '\000-\037' | sed 's/\\/\\\\/g; s/"/\\"/g')"; }
isnum() { printf '%s' "$1" | grep -Eq '^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$'; }
fig() { # key value: a figure for the README (numbers stay numbers)
  local v=$2
  isnum "$v" || v=$(jstr "$v")
  figures_json="$figures_json${figures_json:+, }$(jstr "$1"): $v"
}
record() { # status name figure
  checks_json="$checks_json${checks_json:+, }{\"check\": $(jstr "$2"), \"status\": $(jstr "$1"), \"figure\": $(jstr "$3")}"
}
pass() { echo "PASS $1: $2"; record PASS "$1" "$2"; }
fail() { echo "FAIL $1: $2"; record FAIL "$1" "$2"; failures=$((failures + 1)); }
info() { echo "INFO $1: $2"; record INFO "$1" "$2"; }
# First value of "key": in a cJSON-printed file (one key per line): the
# number, boolean or null as written, or the string without its quotes.
jget() {
  awk -v k="\"$2\":" '{
      line = $0; sub(/^[ \t]+/, "", line)
      if (index(line, k) != 1) next
      v = substr(line, length(k) + 1); sub(/^[ \t]+/, "", v); sub(/,[ \t]*$/, "", v)
      if (v ~ /^".*"$/) v = substr(v, 2, length(v) - 2)
      print v; exit }' "$1" 2>/dev/null
}
# The lines of a nested object "key": { ... } of a cJSON-printed file.
jobj() { awk -v k="\"$2\":" 'index($0, k) && /\{[ \t]*$/ { on = 1; next } on && /^[ \t]*}/ { exit } on' "$1" 2>/dev/null; }
fcmp() { awk "BEGIN { exit !($1) }"; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f", 100 * a / b; else printf "?" }'; }
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null; }
# run NAME SECONDS cmd...: runs cmd in the background so $RUN_PID is the
# program itself (not a timeout wrapper), kills it after SECONDS; $RUN_RC.
run_bg() {
  local secs=$1 left; shift
  # every run ends before the hard stop, so the figures are always written
  left=$(awk -v a="$T0" -v b="$(date +%s.%N)" -v h="$HARD_S" 'BEGIN { printf "%d", h - (b - a) }')
  [ "$left" -lt "$secs" ] && secs=$left
  [ "$secs" -lt 1 ] && secs=1
  "$@" >"$tmp/$RUN_NAME.out" 2>"$tmp/$RUN_NAME.err" &
  RUN_PID=$!
  ( sleep "$secs"; kill -TERM "$RUN_PID" 2>/dev/null; sleep 5; kill -KILL "$RUN_PID" 2>/dev/null ) &
  RUN_WD=$!
  watch_pids="$watch_pids $RUN_WD"
}
run_wait() {
  wait "$RUN_PID"; RUN_RC=$?
  kill "$RUN_WD" 2>/dev/null; wait "$RUN_WD" 2>/dev/null
}
run() { RUN_NAME=$1; shift; local secs=$1; shift; run_bg "$secs" "$@"; run_wait; }

# ---- the card ----------------------------------------------------------------
echo "kvlab GPU checks ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
printf '%s\n' "$smi_l" | sed 's/^/  /'
q=$(nvidia-smi --query-gpu=name,pci.bus_id,memory.total,driver_version,compute_cap --format=csv,noheader 2>/dev/null |
    head -n 1)
[ -z "$q" ] && q=$(nvidia-smi --query-gpu=name,pci.bus_id,memory.total,driver_version --format=csv,noheader | head -n 1)
smi_name=$(printf '%s' "$q" | cut -d, -f1 | sed 's/^ *//')
smi_driver=$(printf '%s' "$q" | cut -d, -f4 | tr -d ' ')
smi_cc=$(printf '%s' "$q" | cut -d, -f5 | tr -d ' ')
drv_cuda=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)
mig=0
printf '%s\n' "$smi_l" | grep -q 'MIG ' && mig=1
arch=$(printf '%s' "$smi_cc" | tr -d '.')
printf '%s' "$arch" | grep -Eq '^[0-9]{2,3}$' || arch=90
echo "  driver $smi_driver (CUDA $drv_cuda), compute capability ${smi_cc:-?} -> sm_$arch$([ $mig = 1 ] && echo ', MIG slices present')"
fig card "$smi_name"; fig driver "$smi_driver"; fig driver_cuda "$drv_cuda"; fig sm "$arch"; fig mig_gpu "$mig"

# ---- build (or a prebuilt binary) --------------------------------------------
nvcc=""
for c in "${CUDACXX:-}" "$(command -v nvcc 2>/dev/null)" /usr/local/cuda/bin/nvcc \
         $(ls -d /usr/local/cuda-*/bin/nvcc 2>/dev/null | sort -V -r); do
  [ -n "$c" ] && [ -x "$c" ] && { nvcc=$c; break; }
done
TEST_CUDA=""
build_failed=""
if [ -z "$KVLAB" ] && [ $BUILD = 1 ] && [ -n "$nvcc" ] && command -v cmake >/dev/null 2>&1; then
  nv_ver=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  bdir="$root/build-gpu-check"
  b0=$(date +%s.%N)
  jobs=$(nproc 2>/dev/null || echo 4)
  echo "  building with $nvcc (CUDA $nv_ver) for sm_$arch into $bdir ..."
  if cmake -S "$root" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DKVLAB_TUI=OFF -DKVLAB_CUDA=ON \
       -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" >"$tmp/cmake.log" 2>&1 &&
     cmake --build "$bdir" -j"$jobs" --target kvlab >>"$tmp/cmake.log" 2>&1; then
    cmake --build "$bdir" -j"$jobs" --target test_cuda >>"$tmp/cmake.log" 2>&1 || true
    KVLAB="$bdir/kvlab"
    bs=$(awk -v a="$b0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
    pass build "CUDA $nv_ver for sm_$arch in $bs s ($bdir)"
    fig build_s "$bs"; fig build "nvcc $nv_ver, sm_$arch"
    case "$drv_cuda" in "") ;; *)
      if fcmp "${nv_ver%%.*} > ${drv_cuda%%.*}"; then
        info build "the toolkit (CUDA $nv_ver) is newer than the driver (CUDA $drv_cuda): expect 'driver version is insufficient'"
      fi ;;
    esac
  else
    build_failed="cmake failed: $(grep -iE 'error|not found' "$tmp/cmake.log" | head -n 2 | tr '\n' ' ')"
  fi
fi
if [ -z "$KVLAB" ]; then
  [ -z "$nvcc" ] && echo "  no CUDA toolkit here (no nvcc in CUDACXX, PATH or /usr/local/cuda*): using a prebuilt kvlab"
  for c in "$root/build-gpu-prebuilt/kvlab" "$root/build-gpu-check/kvlab" "$root/build-engine/kvlab" "$root/build/kvlab"; do
    [ -x "$c" ] && { KVLAB=$c; break; }
  done
fi
if [ -n "${build_failed:-}" ]; then
  if [ -n "$KVLAB" ]; then info build "$build_failed; using the prebuilt $KVLAB"; else fail build "$build_failed"; fi
fi
if [ -z "$KVLAB" ] || [ ! -x "$KVLAB" ]; then
  fail setup "no kvlab binary: install the CUDA toolkit and cmake, or carry build-gpu-prebuilt/ (tests/gpu/prebuild.sh)"
  echo "{\"checks\": [$checks_json], \"figures\": {$figures_json}}" >"$JSON" 2>/dev/null
  exit 1
fi
kdir=$(cd "$(dirname "$KVLAB")" && pwd)
for d in "$kdir/lib" "$kdir/../lib"; do [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; done
for c in "$kdir/test_cuda" "$kdir/tests/test_cuda"; do [ -x "$c" ] && { TEST_CUDA=$c; break; }; done
if ! "$KVLAB" --version >/dev/null 2>&1; then
  fail setup "$KVLAB does not start: $("$KVLAB" --version 2>&1 | head -n 1)"
fi
echo "  kvlab: $KVLAB"
export KVLAB_DATA_DIR=${KVLAB_DATA_DIR:-$root}
export KVLAB_DEVICE=cuda # a device that does not answer is a failure here, not a fallback

# ---- 1. the device: probe (bf16, 8 GiB pool, best/median of 10) -------------
run probe 120 "$KVLAB" probe --json --repeats 10
P="$tmp/probe.out"
backend=$(jget "$P" backend)
name=$(jget "$P" name)
if [ $RUN_RC -eq 0 ] && [ "$backend" = cuda ]; then
  pass device "$name, cc $(jget "$P" compute_capability), $(jget "$P" sm_count) SMs, PCI $(jget "$P" pci_bus_id), total $(jget "$P" total_gib | cut -c1-6) GiB, free $(jget "$P" free_gib | cut -c1-6) GiB$( [ -n "$(jget "$P" mig)" ] && echo ", MIG $(jget "$P" mig)"), peak $(jget "$P" peak_gbps | cut -d. -f1) GB/s ($(jget "$P" peak_how))"
else
  fail device "probe exit $RUN_RC, backend '${backend:-none}': $(head -c 400 "$tmp/probe.err") $(jget "$P" error)"
fi
fig device "$name"; fig total_gib "$(jget "$P" total_gib)"; fig peak_gbps "$(jget "$P" peak_gbps)"; fig mig "$(jget "$P" mig)"
ctx=$(jget "$P" cuda_context_gib)
if [ -n "$ctx" ] && [ "$ctx" != null ] && fcmp "$ctx > 0.01"; then
  pass context "$(printf '%.3f' "$ctx") GiB, $(jget "$P" cuda_context_how)"
  fig context_gib "$ctx"
elif [ $mig = 1 ]; then
  info context "not measured on this MIG slice: $(jget "$P" cuda_context_how)"
else
  fail context "not measured: $(jget "$P" cuda_context_how)"
fi
am=$(jget "$P" pool_alloc_ms)
if [ -n "$am" ] && fcmp "$am >= 0"; then
  pass pool-alloc "$(printf '%.2f' "$am") ms for one cudaMalloc of a $(jget "$P" pool_gib | cut -c1-5) GiB KV pool"
  fig pool_alloc_ms "$am"; fig pool_gib "$(jget "$P" pool_gib)"
else
  fail pool-alloc "no figure: $(jget "$P" error)"
fi
ms=$(jget "$P" memset_best_gbps); mc=$(jget "$P" memcpy_best_gbps); pk=$(jget "$P" peak_gbps)
if [ -n "$ms" ] && fcmp "$ms > 0" && [ -n "$mc" ] && fcmp "$mc > 0"; then
  pass roofline "cudaMemset $(printf '%.0f' "$ms") GB/s (median $(printf '%.0f' "$(jget "$P" memset_median_gbps)"), $(pct "$ms" "$pk")% of peak), cudaMemcpy $(printf '%.0f' "$mc") GB/s read+write (median $(printf '%.0f' "$(jget "$P" memcpy_median_gbps)"), $(pct "$mc" "$pk")% of peak), $(jget "$P" memcpy_gib | cut -c1-5) GiB each"
  fig memset_gbps "$ms"; fig memcpy_gbps "$mc"
else
  fail roofline "no memset/memcpy figures: $(jget "$P" error)"
fi

# ---- 2. the kernels in every dtype against that roofline -------------------
kernel_lines() { # file dtype
  local f=$1 dt=$2 k
  for k in write gather verify; do
    local b m r mm roofname
    b=$(jget "$f" ${k}_best_gbps); m=$(jget "$f" ${k}_median_gbps); r=$(jget "$f" ${k}_fraction_of_roofline)
    mm=$(jget "$f" ${k}_mismatches)
    roofname=$([ $k = write ] && echo memset || echo memcpy)
    if [ -z "$b" ]; then fail "$k-$dt" "no figure: $(jget "$f" error) $(head -c 200 "${f%.out}.err")"; continue; fi
    local line="$(printf '%.0f' "$b") GB/s best, $(printf '%.0f' "$m") median = $(printf '%.1f' "$(awk -v r="$r" 'BEGIN{print 100*r}')")% of the $roofname rate, $(pct "$b" "$pk")% of peak; $mm mismatches"
    fig "${k}_gbps_$dt" "$b"; fig "${k}_roofline_$dt" "$r"
    if [ "$mm" != 0 ]; then fail "$k-$dt" "$line (read back wrong)"
    elif [ $k != verify ] && ! fcmp "$r >= $MINROOF"; then fail "$k-$dt" "$line (goal >= $(pct "$MINROOF" 1)% of $roofname)"
    else pass "$k-$dt" "$line"; fi
  done
}
kernel_lines "$P" bfloat16
for dt in float16 fp8_e4m3 fp8_e5m2 float32 int8; do
  run "probe-$dt" 90 "$KVLAB" probe --json --kv-cache-dtype "$dt" --pool-gib 4 --gather-gib 1 --repeats 5
  if [ $RUN_RC -ne 0 ] && [ -z "$(jget "$tmp/probe-$dt.out" write_best_gbps)" ]; then
    fail "kernels-$dt" "probe exit $RUN_RC: $(head -c 300 "$tmp/probe-$dt.err")"
  else
    kernel_lines "$tmp/probe-$dt.out" "$dt"
  fi
done

# ---- 3. serve --allocate: nvidia-smi shows kvlab's own pid holding the plan --
gpu_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "$1" 2>/dev/null | head -n 1 | tr -d ' '; }
bus=$(jget "$P" pci_bus_id)
sel=${bus:-0}
before=$(gpu_used "$sel")
RUN_NAME=serve
run_bg 150 "$KVLAB" serve "$MODEL" --gpu this --allocate --hold inf --json
spid=$RUN_PID
seen=""
for _ in $(seq 1 120); do
  grep -q '"device"' "$tmp/serve.out" 2>/dev/null && grep -q '^}' "$tmp/serve.out" && grep -q "holding the memory" "$tmp/serve.err" && { seen=1; break; }
  kill -0 "$spid" 2>/dev/null || break
  sleep 0.5
done
apps="" how="" during=""
if [ -n "$seen" ]; then
  sleep 2
  during=$(gpu_used "$sel")
  t0=$(ticks "$spid"); sleep 2; t1=$(ticks "$spid")
  # nvidia-smi's per-process figure for kvlab's own pid; in a container the
  # pid differs from the host's, so also a lone process named kvlab.
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits >"$tmp/apps" 2>/dev/null
  apps=$(awk -F', *' -v p="$spid" '$1 == p && $3 ~ /^[0-9]+$/ { print $3 }' "$tmp/apps" | head -n 1)
  [ -n "$apps" ] && how="nvidia-smi, process $spid"
  if [ -z "$apps" ] && [ "$(grep -c 'kvlab' "$tmp/apps")" = 1 ]; then
    apps=$(awk -F', *' '$2 ~ /kvlab/ && $3 ~ /^[0-9]+$/ { print $3 }' "$tmp/apps"); [ -n "$apps" ] && how="nvidia-smi, the one kvlab process"
  fi
  kill -INT "$spid"
fi
t_sig=$(date +%s.%N)
run_wait
t_end=$(awk -v a="$t_sig" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
jobj "$tmp/serve.out" device >"$tmp/serve-device.out"
S="$tmp/serve-device.out"
budget=$(jget "$tmp/serve.out" budget_gib)
own=$(jget "$S" device_used_gib)
[ "$own" = null ] && own=""
if [ -z "$seen" ] || [ "$(jget "$S" allocated)" != true ]; then
  fail serve-footprint "serve --allocate exit $RUN_RC: $(jget "$S" error) $(head -c 300 "$tmp/serve.err")"
else
  if [ -n "$apps" ]; then shown=$(awk -v m="$apps" 'BEGIN { printf "%.2f", m / 1024 }')
  elif [ $mig = 0 ] && [ -n "$before" ] && [ -n "$during" ]; then
    shown=$(awk -v a="$before" -v b="$during" 'BEGIN { printf "%.2f", (b - a) / 1024 }'); how="nvidia-smi, the card's used memory before and during"
  else shown=$(printf '%.2f' "${own:-0}"); how="kvlab's own cudaMemGetInfo (nvidia-smi cannot show this process here)"
  fi
  tol=$(awk -v b="$budget" 'BEGIN { t = 0.02 * b; printf "%.2f", (t > 1 ? t : 1) }')
  line="$MODEL: $shown GiB held ($how), plan budget $budget GiB (total x gpu_memory_utilization); kvlab holds $(jget "$S" held_gib | cut -c1-6) GiB + a $(jget "$S" cuda_context_gib | cut -c1-5) GiB context, its own view $(printf '%.2f' "${own:-0}") GiB; K/V written at $(jget "$S" write_gbps | cut -d. -f1) GB/s, $(jget "$S" mismatches) mismatches"
  fig footprint_gib "$shown"; fig footprint_source "$how"; fig budget_gib "$budget"; fig serve_write_gbps "$(jget "$S" write_gbps)"
  if fcmp "($shown - $budget) <= $tol && ($budget - $shown) <= $tol" && [ "$(jget "$S" mismatches)" = 0 ]; then
    pass serve-footprint "$line"
  else
    fail serve-footprint "$line (tolerance $tol GiB)"
  fi
  if [ -n "${t0:-}" ] && [ -n "${t1:-}" ] && [ $((t1 - t0)) -le 10 ] && fcmp "$t_end < 10"; then
    pass hold "--hold inf slept ($((t1 - t0)) CPU ticks in 2 s); SIGINT released the memory and exited in $t_end s (exit $RUN_RC)"
  else
    fail hold "--hold inf: $(( ${t1:-0} - ${t0:-0} )) CPU ticks in 2 s, exit $t_end s after SIGINT (exit $RUN_RC)"
  fi
fi

# ---- 4. the trace on the device vs the host, tp 1 and 2 --------------------
run parity 180 "$KVLAB" probe --parity --json
R="$tmp/parity.out"
steps=$(jget "$R" trace_steps); pre=$(jget "$R" trace_preemptions); hits=$(jget "$R" trace_prefix_cache_hits)
vfail=$(jget "$R" trace_verify_error)
if [ -n "$steps" ] && [ "${pre:-0}" -gt 0 ] && [ "${hits:-0}" -gt 0 ] && [ -z "$vfail" ]; then
  pass trace-verify "$steps steps on the GPU, read back after every step (what changed) and in full every 8: 0 mismatches; $pre preemptions, $hits prefix-cache hit tokens ($(jget "$R" seconds_device | cut -c1-5) s)"
else
  fail trace-verify "exit $RUN_RC, steps ${steps:-?}, preemptions ${pre:-?}, hits ${hits:-?}: ${vfail:-$(head -c 300 "$tmp/parity.err")}"
fi
if [ "$(jget "$R" parity_identical)" = true ]; then
  pass parity "host and CUDA backends, tp 1 and 2: identical block tables, $(jget "$R" parity_events) events and metrics"
else
  fail parity "$(jget "$R" parity_difference) $(jget "$R" error) $(head -c 300 "$tmp/parity.err")"
fi

# ---- 5. ranks that share the card: simulate --device at tp 2 ----------------
run simulate 120 "$KVLAB" simulate "$MODEL" --gpu this --max-model-len 8192 --tensor-parallel-size 2 --device \
    --trace gen:requests=200,rate=50,prompt=1024,output=64,shared=0.5,prefix=512,seed=3 --json
M="$tmp/simulate.out"
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then visible=$(printf '%s' "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
else visible=$(printf '%s\n' "$smi_l" | grep -c '^GPU '); fi
fin=$(jget "$M" requests_finished); rej=$(jget "$M" requests_rejected)
note=$(grep -o 'scaled by [0-9.]*' "$tmp/simulate.err" | head -n 1)
if [ $RUN_RC -eq 0 ] && [ "${fin:-0}" -gt 0 ] && [ $((${fin:-0} + ${rej:-0})) = 200 ] && { [ -n "$note" ] || [ "$visible" -ge 2 ]; }; then
  pass shared-card "simulate --device --tensor-parallel-size 2: $fin requests, $(jget "$M" num_blocks) blocks per rank${note:+, both ranks on one card: $note}"
else
  fail shared-card "exit $RUN_RC, $fin requests finished: $(grep -v '^kvlab: CUDA backend' "$tmp/simulate.err" | head -c 300)"
fi

# ---- 6. an out-of-memory on purpose, reported and survived -----------------
run oom1 60 "$KVLAB" probe --pool-gib 100000
run_rc1=$RUN_RC
run oom2 60 "$KVLAB" serve "$MODEL" --gpu this --allocate --hold 0 --num-gpu-blocks-override 50000000
run_rc2=$RUN_RC
cat "$tmp/oom1.out" "$tmp/oom1.err" >"$tmp/oom1.all"; cat "$tmp/oom2.out" "$tmp/oom2.err" >"$tmp/oom2.all"
if [ $run_rc1 -eq 1 ] && [ $run_rc2 -eq 1 ] && grep -q "CUDA out of memory. Tried to allocate" "$tmp/oom1.all" &&
   grep -q "(KV cache pool, rank 0)" "$tmp/oom1.all" && grep -q "CUDA out of memory. Tried to allocate" "$tmp/oom2.all"; then
  pass oom "$(grep -o 'CUDA out of memory. Tried to allocate [^)]*)' "$tmp/oom2.all" | head -n 1) ... (probe exit 1, serve exit 1, no crash)"
else
  fail oom "probe exit $run_rc1, serve exit $run_rc2 (want 1 and 1 with 'CUDA out of memory ... (KV cache pool, rank 0)'): $(tail -c 300 "$tmp/oom2.all")"
fi

# ---- 7. a MIG slice is read as itself ----------------------------------------
if [ $mig = 1 ] || [ -n "$(jget "$P" mig)" ]; then
  if [ -z "$(jget "$P" catalogue_id)" ]; then
    pass mig "slice '$(jget "$P" mig)' ($(jget "$P" total_gib | cut -c1-6) GiB): no catalogue entry claimed, context $(jget "$P" cuda_context_how)"
  else
    fail mig "a MIG slice matched catalogue entry $(jget "$P" catalogue_id)"
  fi
fi

# ---- 8. the unit tests on the device -------------------------------------------
if [ -n "$TEST_CUDA" ]; then
  export KVLAB_SOURCE_DIR=$root
  run unit 180 "$TEST_CUDA"
  if [ $RUN_RC -eq 0 ] && ! grep -q "SKIPPED" "$tmp/unit.out"; then
    pass unit-on-device "$(grep -c '\[       OK \]' "$tmp/unit.out") cmocka tests: real blocks in every dtype written, read back, gathered and benchmarked; host parity at tp 1 and 2"
  else
    fail unit-on-device "exit $RUN_RC: $(grep -E 'FAILED|ERROR|error|SKIPPED|no CUDA device' "$tmp/unit.out" | head -n 3 | tr '\n' ' ')"
  fi
else
  info unit-on-device "no test_cuda beside kvlab (the build has no cmocka): skipped"
fi

# ---- the clock, the figures ------------------------------------------------------
total=$(elapsed)
fig total_s "$total"
if fcmp "$total <= $LIMIT_S"; then pass time "$total s for the build and every check (limit $LIMIT_S s)"
else fail time "$total s, over the $LIMIT_S s limit"; fi
mkdir -p "$(dirname "$JSON")" 2>/dev/null
printf '{\n  "kvlab_gpu_check": 1,\n  "failures": %d,\n  "figures": {%s},\n  "checks": [%s]\n}\n' \
  "$failures" "$figures_json" "$checks_json" >"$JSON" && echo "figures written to $JSON"
if [ $failures -eq 0 ]; then echo "all GPU checks passed"; else echo "$failures GPU check(s) failed"; fi
[ $failures -eq 0 ]

#!/usr/bin/env bash
# Device checks for the CUDA backend, as one prepared command whose figures
# always come back: it says what the machine needs and checks that first,
# builds kvlab for the card it finds (or uses a prebuilt one), then runs
# every device check once, printing one line per check with its figure.
# The JSON is rewritten after every section and on any exit, every external
# call has a time limit, and no process it started outlives it.
#
#   tests/gpu/check.sh [--json FILE] [--kvlab PATH] [--no-build]
#
# --json FILE   where the figures go (default $OUT/gpu-check.json when $OUT
#               is set, else ./gpu-check.json)
# --kvlab PATH  a prebuilt kvlab (test_cuda beside it or in tests/ is used
#               too); without it, and when nothing can be built here,
#               build-gpu-prebuilt/kvlab (tests/gpu/prebuild.sh makes it)
# --no-build    do not build even when a toolkit is found
#
# Exit 0: every check passed. 1: a check failed, or the run stopped early
# (one STOP line gives the reason: the driver is too old for the CUDA the
# binary is built with, nothing to run, the card cannot be opened). 77: no
# NVIDIA GPU here (one SKIP line). 2: bad arguments.
#
# Environment: KVLAB_CHECK_MODEL (default meta-llama/Llama-3.1-8B-Instruct),
# KVLAB_CHECK_MIN_WRITE (0.85) and KVLAB_CHECK_MIN_GATHER (0.80): the write
# kernel's share of the cudaMemset rate and the gather's of the cudaMemcpy
# rate, both measured in the same run; KVLAB_CHECK_HARD_S (570): no run goes
# past it; CUDA_VISIBLE_DEVICES (the card; on a MIG GPU, the slice); NVIDIA_SMI
# (the nvidia-smi to use; tests point it at a stand-in). See tests/gpu/README.md.
set -u
T0=$(date +%s.%N)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
JSON=""
KVLAB=""
BUILD=1
while [ $# -gt 0 ]; do
  case "$1" in
    --json) [ $# -ge 2 ] || { echo "check.sh: --json needs a file"; exit 2; }; JSON=$2; shift 2 ;;
    --kvlab) [ $# -ge 2 ] || { echo "check.sh: --kvlab needs a path"; exit 2; }; KVLAB=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "check.sh: unknown argument '$1' (see --help)"; exit 2 ;;
  esac
done
[ -z "$JSON" ] && JSON=${OUT:+$OUT/gpu-check.json}
[ -z "$JSON" ] && JSON=./gpu-check.json
LIMIT_S=300   # the build and every check, cold, on an H100/H200
HARD_S=${KVLAB_CHECK_HARD_S:-570}
MODEL=${KVLAB_CHECK_MODEL:-meta-llama/Llama-3.1-8B-Instruct}
MIN_WRITE=${KVLAB_CHECK_MIN_WRITE:-0.85}
MIN_GATHER=${KVLAB_CHECK_MIN_GATHER:-0.80}
SMI=${NVIDIA_SMI:-nvidia-smi}
NEEDS="an NVIDIA GPU whose driver supports the CUDA kvlab is built with (CUDA 13.x: driver R580 or newer; the runtime is linked statically, so the driver is all a prebuilt kvlab needs); to build here, the CUDA toolkit, CMake 3.20+ and a C compiler (cJSON, xxHash and uthash come from third_party/ when not installed; test_cuda needs cmocka); the card to itself (serve --allocate holds 90% of it); 5 minutes"

# ---- the record: lines, figures, JSON rewritten at every step and on exit ----
tmp=$(mktemp -d)
mkdir -p "$(dirname "$JSON")" 2>/dev/null
failures=0
checks_json=""
figures_json=""
status=running
stopped=""
section=start
RUN_PID=""
RUN_WD=""
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
jstr() { printf '"%s"' "$(printf '%s' "$1" | tr -d '\000-\037' | sed 's/\\/\\\\/g; s/"/\\"/g')"; }
isnum() { printf '%s' "$1" | grep -Eq '^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$'; }
fig() { # key value: a figure for the README (numbers stay numbers)
  local v=$2
  isnum "$v" || v=$(jstr "$v")
  figures_json="$figures_json${figures_json:+, }$(jstr "$1"): $v"
}
write_json() {
  printf '{\n  "kvlab_gpu_check": 2,\n  "status": %s,\n  "stopped": %s,\n  "section": %s,\n  "failures": %d,\n  "elapsed_s": %s,\n  "needs": %s,\n  "figures": {%s},\n  "checks": [%s]\n}\n' \
    "$(jstr "$status")" "$(jstr "$stopped")" "$(jstr "$section")" "$failures" "$(elapsed)" "$(jstr "$NEEDS")" \
    "$figures_json" "$checks_json" >"$JSON.part" 2>/dev/null && mv -f "$JSON.part" "$JSON" 2>/dev/null
}
record() { # status name figure
  checks_json="$checks_json${checks_json:+, }{\"check\": $(jstr "$2"), \"status\": $(jstr "$1"), \"figure\": $(jstr "$3")}"
}
pass() { echo "PASS $1: $2"; record PASS "$1" "$2"; }
fail() { echo "FAIL $1: $2"; record FAIL "$1" "$2"; failures=$((failures + 1)); }
notrun() { echo "NOT-RUN $1: did not run: $2"; record NOT-RUN "$1" "did not run: $2"; failures=$((failures + 1)); }
info() { echo "INFO $1: $2"; record INFO "$1" "$2"; }
begin() { section=$1; write_json; }
# Every process this script started ends with it: the program under test
# (its process group when it is still there) and the watchdog.
finish() {
  local rc=$?
  trap - EXIT INT TERM
  [ -n "$RUN_WD" ] && kill -TERM "$RUN_WD" 2>/dev/null
  if [ -n "$RUN_PID" ] && kill -0 "$RUN_PID" 2>/dev/null; then
    kill -TERM "$RUN_PID" 2>/dev/null; sleep 1; kill -KILL "$RUN_PID" 2>/dev/null
  fi
  [ -n "$RUN_WD" ] && wait "$RUN_WD" 2>/dev/null
  [ -n "$RUN_PID" ] && wait "$RUN_PID" 2>/dev/null
  if [ "$status" = running ]; then
    if [ $rc -eq 0 ] && [ $failures -eq 0 ]; then status=passed; else status=failed; fi
  fi
  write_json
  rm -rf "$tmp"
  exit $rc
}
trap finish EXIT
trap 'stopped="interrupted in section $section"; status=stopped; exit 130' INT
trap 'stopped="terminated in section $section"; status=stopped; exit 143' TERM
# One reason, then nothing else runs.
stop() {
  echo "STOP: $1"
  record STOP "$section" "$1"
  stopped=$1
  status=stopped
  failures=$((failures + 1))
  exit 1
}
# Seconds a step may take: what it asks for, never past the hard stop.
lim() {
  awk -v a="$T0" -v b="$(date +%s.%N)" -v h="$HARD_S" -v s="$1" \
    'BEGIN { left = int(h - (b - a)) - 8; if (left < s) s = left; if (s < 1) s = 1; print s }'
}
# t SECONDS cmd...: an external call with a time limit (124: it ran out).
t() { local s; s=$(lim "$1"); shift; timeout -k 5 "$s" "$@"; }
# run NAME SECONDS cmd...: stdout/stderr to $tmp/NAME.{out,err}, $RUN_RC; 124 = timed out.
run() {
  local name=$1 secs=$2; shift 2
  t "$secs" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  RUN_RC=$?
}
why_rc() { [ "$1" = 124 ] || [ "$1" = 137 ] && echo "timed out" || echo "exit $1"; }
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
ver_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]; } # $1 >= $2
smi() { t 20 "$SMI" "$@"; }

echo "kvlab GPU checks ($(date -u +%Y-%m-%dT%H:%M:%SZ)), figures to $JSON"
echo "  needs: $NEEDS"
write_json

# ---- 0. is there a GPU, and can its driver run this kvlab? --------------------
begin machine
if ! command -v "$SMI" >/dev/null 2>&1; then
  echo "SKIP: no NVIDIA GPU here ($SMI not found): the device checks need one"
  status=skipped; stopped="no NVIDIA GPU here ($SMI not found)"
  exit 77
fi
smi_l=$(smi -L 2>&1); smi_rc=$?
if [ $smi_rc -ne 0 ] || ! printf '%s\n' "$smi_l" | grep -q '^GPU '; then
  first=$(printf '%s' "$smi_l" | head -n 1)
  echo "SKIP: no NVIDIA GPU here ($SMI -L: $([ $smi_rc = 124 ] && echo "no answer in 20 s" || echo "${first:-no GPU listed}"))"
  status=skipped; stopped="no NVIDIA GPU here: ${first:-$SMI -L $(why_rc $smi_rc)}"
  exit 77
fi
printf '%s\n' "$smi_l" | sed 's/^/  /'
q=$(smi --query-gpu=name,pci.bus_id,memory.total,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -n 1)
[ -z "$q" ] && q=$(smi --query-gpu=name,pci.bus_id,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
smi_name=$(printf '%s' "$q" | cut -d, -f1 | sed 's/^ *//')
smi_driver=$(printf '%s' "$q" | cut -d, -f4 | tr -d ' ')
smi_cc=$(printf '%s' "$q" | cut -d, -f5 | tr -d ' ')
drv_cuda=$(smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)
mig=0
printf '%s\n' "$smi_l" | grep -q 'MIG ' && mig=1
arch=$(printf '%s' "$smi_cc" | tr -d '.')
printf '%s' "$arch" | grep -Eq '^[0-9]{2,3}$' || arch=90
echo "  driver ${smi_driver:-?} (CUDA ${drv_cuda:-?}), compute capability ${smi_cc:-?} -> sm_$arch$([ $mig = 1 ] && echo ', MIG slices present')"
fig card "$smi_name"; fig driver "$smi_driver"; fig driver_cuda "$drv_cuda"; fig sm "$arch"; fig mig_gpu "$mig"

# The CUDA a binary was built with: BUILT-WITH beside a prebuilt one, else
# its build directory's CMake record of nvcc.
built_cuda() {
  local d f
  d=$(cd "$(dirname "$1")" 2>/dev/null && pwd) || return
  if [ -f "$d/BUILT-WITH" ]; then sed -n 's/.*CUDA \([0-9][0-9.]*\).*/\1/p' "$d/BUILT-WITH" | head -n 1; return; fi
  f=$(ls "$d"/CMakeFiles/*/CMakeCUDACompiler.cmake 2>/dev/null | head -n 1)
  [ -n "$f" ] && sed -n 's/^set(CMAKE_CUDA_COMPILER_VERSION "\([0-9.]*\)").*/\1/p' "$f" | head -n 1
}
# Stops when the driver cannot run a CUDA $1 runtime: CUDA 13 needs R580+,
# CUDA 12 R525+ (minor-version compatibility within a major release).
check_driver() {
  local want=$1 what=$2 major min
  [ -z "$want" ] && { info driver "cannot tell which CUDA $what was built with: driver not checked"; return; }
  major=${want%%.*}
  case "$major" in 13) min=580 ;; 12) min=525 ;; *) min="" ;; esac
  if [ -n "$drv_cuda" ] && ! ver_ge "${drv_cuda%%.*}" "$major"; then
    stop "the NVIDIA driver ${smi_driver:-?} supports CUDA $drv_cuda; $what is built with CUDA $want and needs a driver for CUDA $major.x${min:+ (R$min or newer)}: update the driver, or build with a CUDA $drv_cuda toolkit"
  fi
  if [ -n "$min" ] && [ -n "$smi_driver" ] && ! ver_ge "${smi_driver%%.*}" "$min"; then
    stop "the NVIDIA driver $smi_driver is older than R$min, which CUDA $want needs ($what): update the driver"
  fi
  pass driver "driver ${smi_driver:-?} (CUDA ${drv_cuda:-?}) runs CUDA $want ($what)"
}

# ---- 1. build (or a prebuilt binary) ------------------------------------------
begin build
nvcc=""
for c in "${CUDACXX:-}" "$(command -v nvcc 2>/dev/null)" /usr/local/cuda/bin/nvcc \
         $(ls -d /usr/local/cuda-*/bin/nvcc 2>/dev/null | sort -V -r); do
  [ -n "$c" ] && [ -x "$c" ] && { nvcc=$c; break; }
done
TEST_CUDA=""
build_failed=""
if [ -z "$KVLAB" ] && [ $BUILD = 1 ] && [ -n "$nvcc" ] && command -v cmake >/dev/null 2>&1; then
  nv_ver=$(t 30 "$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  check_driver "$nv_ver" "the toolkit here ($nvcc)"
  bdir="$root/build-gpu-check"
  b0=$(date +%s.%N)
  jobs=$(nproc 2>/dev/null || echo 4)
  echo "  building with $nvcc (CUDA $nv_ver) for sm_$arch into $bdir ..."
  if t 120 cmake -S "$root" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DKVLAB_TUI=OFF -DKVLAB_CUDA=ON \
       -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" >"$tmp/cmake.log" 2>&1 &&
     t 240 cmake --build "$bdir" -j"$jobs" --target kvlab >>"$tmp/cmake.log" 2>&1; then
    t 120 cmake --build "$bdir" -j"$jobs" --target test_cuda >>"$tmp/cmake.log" 2>&1 || true
    KVLAB="$bdir/kvlab"
    bs=$(awk -v a="$b0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
    deps=$(grep -o 'kvlab: [a-zA-Z]* from third_party' "$tmp/cmake.log" | awk '{ print $2 }' | paste -sd, -)
    pass build "CUDA $nv_ver for sm_$arch in $bs s ($bdir; ${deps:+$deps from third_party/}${deps:-the installed cJSON, xxHash and uthash})"
    fig build_s "$bs"; fig build "nvcc $nv_ver, sm_$arch"
  else
    build_failed="the build failed ($(tail -c 2000 "$tmp/cmake.log" | grep -iE 'error|not found|timed out' | head -n 2 | tr '\n' ' '))"
    cp "$tmp/cmake.log" "$(dirname "$JSON")/gpu-check-build.log" 2>/dev/null
  fi
fi
if [ -z "$KVLAB" ]; then
  [ -z "$nvcc" ] && echo "  no CUDA toolkit here (no nvcc in CUDACXX, PATH or /usr/local/cuda*): using a prebuilt kvlab"
  for c in "$root/build-gpu-prebuilt/kvlab" "$root/build-gpu-check/kvlab" "$root/build-engine/kvlab" "$root/build/kvlab"; do
    [ -x "$c" ] && { KVLAB=$c; break; }
  done
  [ -n "$build_failed" ] && [ -n "$KVLAB" ] && info build "$build_failed; using the prebuilt $KVLAB"
fi
if [ -z "$KVLAB" ] || [ ! -x "$KVLAB" ]; then
  stop "no kvlab to run${build_failed:+: $build_failed}${KVLAB:+ ($KVLAB is not an executable)}: install the CUDA toolkit and CMake here, or carry build-gpu-prebuilt/ (tests/gpu/prebuild.sh)"
fi
kdir=$(cd "$(dirname "$KVLAB")" && pwd)
KVLAB="$kdir/$(basename "$KVLAB")"
for d in "$kdir/lib" "$kdir/../lib"; do [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; done
for c in "$kdir/test_cuda" "$kdir/tests/test_cuda"; do [ -x "$c" ] && { TEST_CUDA=$c; break; }; done
[ "${bdir:-}" = "$kdir" ] || check_driver "$(built_cuda "$KVLAB")" "$KVLAB"
v=$(t 20 "$KVLAB" --version 2>&1); vrc=$?
[ $vrc -eq 0 ] || stop "$KVLAB does not start ($(why_rc $vrc)): $(printf '%s' "$v" | head -n 1)"
echo "  kvlab: $KVLAB ($(printf '%s' "$v" | head -n 1))"
export KVLAB_DATA_DIR=${KVLAB_DATA_DIR:-$root}
export KVLAB_DEVICE=cuda # a device that does not answer is a failure here, not a fallback

# ---- 2. the device: probe (bf16, 8 GiB pool, best/median of 10) ---------------
begin device
run probe 120 "$KVLAB" probe --json --repeats 10
P="$tmp/probe.out"
backend=$(jget "$P" backend)
name=$(jget "$P" name)
if [ "$backend" != cuda ]; then
  why=$(grep -v '^$' "$tmp/probe.err" | head -n 1 | sed 's/^kvlab probe: //')
  [ -z "$why" ] && why=$(jget "$P" error)
  [ -z "$why" ] && why="kvlab probe $(why_rc $RUN_RC) with backend '${backend:-none}'"
  stop "the card cannot be opened: $why"
fi
pass device "$name, cc $(jget "$P" compute_capability), $(jget "$P" sm_count) SMs, PCI $(jget "$P" pci_bus_id), total $(jget "$P" total_gib | cut -c1-6) GiB, free $(jget "$P" free_gib | cut -c1-6) GiB$( [ -n "$(jget "$P" mig)" ] && echo ", MIG $(jget "$P" mig)"), peak $(jget "$P" peak_gbps | cut -d. -f1) GB/s ($(jget "$P" peak_how))"
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
  notrun pool-alloc "$(jget "$P" error)"
fi
pk=$(jget "$P" peak_gbps)
roof_line() { # file kind: "X GB/s (median Y, Z% of peak)" or empty when it did not run
  [ "$(jget "$1" "$2_ran")" = true ] || return
  printf '%.0f GB/s (median %.0f, %s%% of peak)' "$(jget "$1" "$2_best_gbps")" "$(jget "$1" "$2_median_gbps")" "$(pct "$(jget "$1" "$2_best_gbps")" "$pk")"
}
for k in memset memcpy read; do
  l=$(roof_line "$P" $k)
  if [ -n "$l" ]; then
    pass "roofline-$k" "$l over $(jget "$P" ${k}_gib | cut -c1-5) GiB$([ $k = memcpy ] && echo ' read+write')"
    fig "${k}_gbps" "$(jget "$P" ${k}_best_gbps)"
  else
    notrun "roofline-$k" "$(jget "$P" error) $(head -c 200 "$tmp/probe.err")"
  fi
done

# ---- 3. the kernels in every dtype against their roofline ---------------------
kernel_lines() { # file dtype
  local f=$1 dt=$2 k
  for k in write gather verify; do
    local b m r mm roofname goal line
    if [ "$(jget "$f" ${k}_ran)" != true ]; then
      notrun "$k-$dt" "$(jget "$f" error) $(head -c 200 "${f%.out}.err")"
      continue
    fi
    b=$(jget "$f" ${k}_best_gbps); m=$(jget "$f" ${k}_median_gbps); r=$(jget "$f" ${k}_fraction_of_roofline)
    mm=$(jget "$f" ${k}_mismatches); roofname=$(jget "$f" ${k}_roofline)
    goal=""; [ $k = write ] && goal=$MIN_WRITE; [ $k = gather ] && goal=$MIN_GATHER
    line="$(printf '%.0f' "$b") GB/s best, $(printf '%.0f' "$m") median = $(pct "$r" 1)% of the $roofname rate, $(pct "$b" "$pk")% of peak; $mm mismatches"
    fig "${k}_gbps_$dt" "$b"; fig "${k}_roofline_$dt" "$r"
    if [ "$mm" != 0 ]; then fail "$k-$dt" "$line (read back wrong)"
    elif [ -n "$goal" ] && ! fcmp "$r >= $goal"; then fail "$k-$dt" "$line (goal >= $(pct "$goal" 1)% of $roofname)"
    else pass "$k-$dt" "$line"; fi
  done
}
kernel_lines "$P" bfloat16
begin dtypes
for dt in float16 fp8_e4m3 fp8_e5m2 float32 int8; do
  run "probe-$dt" 60 "$KVLAB" probe --json --kv-cache-dtype "$dt" --pool-gib 4 --gather-gib 1 --repeats 5
  kernel_lines "$tmp/probe-$dt.out" "$dt"
  write_json
done

# ---- 4. serve --allocate: nvidia-smi shows kvlab's own pid holding the plan ---
begin serve-footprint
gpu_used() { smi --query-gpu=memory.used --format=csv,noheader,nounits -i "$1" 2>/dev/null | head -n 1 | tr -d ' '; }
bus=$(jget "$P" pci_bus_id)
sel=${bus:-0}
before=$(gpu_used "$sel")
# kvlab is started directly (not under timeout) so nvidia-smi and /proc see
# its own pid; a watchdog ends it, and is itself ended with its sleep.
secs=$(lim 120)
"$KVLAB" serve "$MODEL" --gpu this --allocate --hold inf --json >"$tmp/serve.out" 2>"$tmp/serve.err" &
RUN_PID=$!
( trap 'kill "$s" 2>/dev/null; exit 0' TERM
  sleep "$secs" & s=$!; wait "$s"
  kill -TERM "$RUN_PID" 2>/dev/null
  sleep 5 & s=$!; wait "$s"
  kill -KILL "$RUN_PID" 2>/dev/null ) >/dev/null 2>&1 </dev/null &
RUN_WD=$!
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
  smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits >"$tmp/apps" 2>/dev/null
  apps=$(awk -F', *' -v p="$spid" '$1 == p && $3 ~ /^[0-9]+$/ { print $3 }' "$tmp/apps" | head -n 1)
  [ -n "$apps" ] && how="nvidia-smi, process $spid"
  if [ -z "$apps" ] && [ "$(grep -c 'kvlab' "$tmp/apps")" = 1 ]; then
    apps=$(awk -F', *' '$2 ~ /kvlab/ && $3 ~ /^[0-9]+$/ { print $3 }' "$tmp/apps"); [ -n "$apps" ] && how="nvidia-smi, the one kvlab process"
  fi
  kill -INT "$spid" 2>/dev/null
fi
t_sig=$(date +%s.%N)
wait "$spid"; RUN_RC=$?
RUN_PID=""
kill -TERM "$RUN_WD" 2>/dev/null; wait "$RUN_WD" 2>/dev/null; RUN_WD=""
t_end=$(awk -v a="$t_sig" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
jobj "$tmp/serve.out" device >"$tmp/serve-device.out"
S="$tmp/serve-device.out"
budget=$(jget "$tmp/serve.out" budget_gib)
own=$(jget "$S" device_used_gib)
[ "$own" = null ] && own=""
if [ -z "$seen" ] || [ "$(jget "$S" allocated)" != true ]; then
  fail serve-footprint "serve --allocate $(why_rc $RUN_RC): $(jget "$S" error) $(head -c 300 "$tmp/serve.err")"
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

# ---- 5. the trace on the device vs the host, tp 1 and 2 -----------------------
begin parity
run parity 150 "$KVLAB" probe --parity --json
R="$tmp/parity.out"
steps=$(jget "$R" trace_steps); pre=$(jget "$R" trace_preemptions); hits=$(jget "$R" trace_prefix_cache_hits)
vfail=$(jget "$R" trace_verify_error)
if [ -z "$steps" ]; then
  notrun trace-verify "probe --parity $(why_rc $RUN_RC): $(jget "$R" error) $(head -c 300 "$tmp/parity.err")"
elif [ "${pre:-0}" -gt 0 ] && [ "${hits:-0}" -gt 0 ] && [ -z "$vfail" ]; then
  pass trace-verify "$steps steps on the GPU, read back after every step (what changed) and in full every 8: 0 mismatches; $pre preemptions, $hits prefix-cache hit tokens ($(jget "$R" seconds_device | cut -c1-5) s)"
else
  fail trace-verify "$(why_rc $RUN_RC), steps $steps, preemptions ${pre:-?}, hits ${hits:-?}: ${vfail:-$(head -c 300 "$tmp/parity.err")}"
fi
if [ -z "$steps" ]; then
  notrun parity "the trace did not run (above)"
elif [ "$(jget "$R" parity_identical)" = true ]; then
  pass parity "host and CUDA backends, tp 1 and 2: identical block tables, $(jget "$R" parity_events) events and metrics"
else
  fail parity "$(jget "$R" parity_difference) $(jget "$R" error) $(head -c 300 "$tmp/parity.err")"
fi

# ---- 6. ranks that share the card: simulate --device at tp 2 ------------------
begin shared-card
run simulate 90 "$KVLAB" simulate "$MODEL" --gpu this --max-model-len 8192 --tensor-parallel-size 2 --device \
    --trace gen:requests=200,rate=50,prompt=1024,output=64,shared=0.5,prefix=512,seed=3 --json
M="$tmp/simulate.out"
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then visible=$(printf '%s' "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
else visible=$(printf '%s\n' "$smi_l" | grep -c '^GPU '); fi
fin=$(jget "$M" requests_finished); rej=$(jget "$M" requests_rejected)
# --json puts the note in the JSON's "notes" list, not on stderr
note=$(grep -o 'scaled by [0-9.]*' "$M" 2>/dev/null | head -n 1)
if [ -z "$fin" ]; then
  notrun shared-card "simulate --device $(why_rc $RUN_RC): $(grep -v '^kvlab: CUDA backend' "$tmp/simulate.err" | head -c 300)"
elif [ $RUN_RC -eq 0 ] && [ "$fin" -gt 0 ] && [ $((fin + ${rej:-0})) = 200 ] && { [ -n "$note" ] || [ "$visible" -ge 2 ]; }; then
  pass shared-card "simulate --device --tensor-parallel-size 2: $fin requests, $(jget "$M" num_blocks) blocks per rank$([ -n "$note" ] && echo ", both ranks on one card: $note" || echo ", on $visible cards")"
else
  fail shared-card "exit $RUN_RC, $fin of 200 requests finished (${rej:-0} rejected), $visible visible card(s), note '${note:-none}': $(grep -v '^kvlab: CUDA backend' "$tmp/simulate.err" | head -c 300)"
fi

# ---- 7. an out-of-memory on purpose, reported as vLLM would, and survived -----
begin oom
run oom1 60 "$KVLAB" probe --pool-gib 100000
run_rc1=$RUN_RC
run oom2 60 "$KVLAB" serve "$MODEL" --gpu this --allocate --hold 0 --num-gpu-blocks-override 50000000
run_rc2=$RUN_RC
cat "$tmp/oom1.out" "$tmp/oom1.err" >"$tmp/oom1.all"; cat "$tmp/oom2.out" "$tmp/oom2.err" >"$tmp/oom2.all"
if [ $run_rc1 -eq 1 ] && [ $run_rc2 -eq 1 ] && grep -q "CUDA out of memory. Tried to allocate" "$tmp/oom1.all" &&
   grep -q "(KV cache pool, rank 0)" "$tmp/oom1.all" && grep -q "CUDA out of memory. Tried to allocate" "$tmp/oom2.all"; then
  pass oom "$(grep -o 'CUDA out of memory. Tried to allocate [^)]*)' "$tmp/oom2.all" | head -n 1) ... (probe exit 1, serve exit 1, no crash)"
  fig oom_line "$(grep -o 'CUDA out of memory.*' "$tmp/oom2.all" | head -n 1)"
else
  fail oom "probe $(why_rc $run_rc1), serve $(why_rc $run_rc2) (want 1 and 1 with 'CUDA out of memory ... (KV cache pool, rank 0)'): $(tail -c 300 "$tmp/oom2.all")"
fi

# ---- 8. a MIG slice is read as itself -----------------------------------------
if [ $mig = 1 ] || [ -n "$(jget "$P" mig)" ]; then
  begin mig
  if [ -z "$(jget "$P" catalogue_id)" ]; then
    pass mig "slice '$(jget "$P" mig)' ($(jget "$P" total_gib | cut -c1-6) GiB): no catalogue entry claimed, context $(jget "$P" cuda_context_how)"
  else
    fail mig "a MIG slice matched catalogue entry $(jget "$P" catalogue_id)"
  fi
fi

# ---- 9. the unit tests on the device ------------------------------------------
begin unit-on-device
if [ -n "$TEST_CUDA" ]; then
  export KVLAB_SOURCE_DIR=$root
  run unit 120 "$TEST_CUDA"
  if [ $RUN_RC -eq 0 ] && ! grep -q "SKIPPED" "$tmp/unit.out"; then
    pass unit-on-device "$(grep -c '\[       OK \]' "$tmp/unit.out") cmocka tests: real blocks in every dtype written, read back (from position 0 and past the first block), gathered and benchmarked; host parity at tp 1 and 2"
  else
    fail unit-on-device "$(why_rc $RUN_RC): $(grep -E 'FAILED|ERROR|error|SKIPPED|no CUDA device' "$tmp/unit.out" | head -n 3 | tr '\n' ' ')"
  fi
else
  # Not the card's failure: this machine has no cmocka to build the unit
  # tests with. The device paths they cover run above (probe's benches read
  # back from past the first block; --parity).
  info unit-on-device "not built: no test_cuda beside $KVLAB (no cmocka here; tests/gpu/prebuild.sh carries one)"
fi

# ---- the clock ------------------------------------------------------------------
begin finished
total=$(elapsed)
fig total_s "$total"
if fcmp "$total <= $LIMIT_S"; then pass time "$total s for the build and every check (limit $LIMIT_S s)"
else fail time "$total s, over the $LIMIT_S s limit"; fi
if [ $failures -eq 0 ]; then status=passed; echo "all GPU checks passed"; else status=failed; echo "$failures GPU check(s) failed"; fi
echo "figures written to $JSON"
[ $failures -eq 0 ]

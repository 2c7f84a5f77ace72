#!/usr/bin/env bash
# Wall time of `kvlab serve` (target: under 20 ms per answer). Not a timed
# test: run it by hand on a quiet machine.
#   bench/serve_speed.sh [path/to/kvlab] [runs]
set -euo pipefail
cd "$(dirname "$0")/.."
kvlab=${1:-build/kvlab}
runs=${2:-50}
[ -x "$kvlab" ] || { echo "no kvlab binary at $kvlab (cmake --build --preset default first)" >&2; exit 2; }

bench() { # label args...
  local label=$1; shift
  local times=() t0 t1
  for ((i = 0; i < runs; i++)); do
    t0=$(date +%s%N)
    "$kvlab" "$@" >/dev/null 2>&1 || true
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk -v label="$label" -v n="$runs" '
    { t[NR] = $1; s += $1 }
    END { printf "%-44s median %6.2f ms  p90 %6.2f ms  mean %6.2f ms  (%d runs)\n",
          label, t[int((n + 1) / 2)] / 1000, t[int(n * 0.9)] / 1000, s / n / 1000, n }'
}

L8=meta-llama/Llama-3.1-8B-Instruct
L70=meta-llama/Llama-3.1-70B-Instruct
bench "8B on a 4090, length check fails (+fixes)" serve $L8 --gpu rtx-4090 --gpu-memory-gib 23.5 \
  --gpu-memory-utilization 0.9 --max-num-batched-tokens 8192
bench "8B on a 4090, --max-model-len 8192" serve $L8 --gpu rtx-4090 --gpu-memory-gib 23.5 \
  --gpu-memory-utilization 0.9 --max-num-batched-tokens 8192 --max-model-len 8192
bench "70B fp8 tp=2 on H100s, --json" serve $L70 --gpu h100-80gb --quantization fp8 -tp 2 \
  --gpu-memory-utilization 0.9 --max-num-batched-tokens 8192 --max-model-len 8192 --json
bench "70B fp8 util 0.9 on one H100 (+fixes)" serve $L70 --gpu h100-80gb --quantization fp8 \
  --gpu-memory-utilization 0.9 --max-num-batched-tokens 8192 --max-model-len 8192

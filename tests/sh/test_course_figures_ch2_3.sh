#!/usr/bin/env bash
# The figures chapters 2 and 3 teach, straight from `kvlab serve --json`
# (the same engine the lessons read): bytes per token for 8B and 70B in bf16
# and fp8, a 32K conversation in decimal GB, running example B's length-check
# error with its estimate, the pool FP8 weights give example B, and tensor
# parallelism past 8 KV heads. Tolerances as in tests/vectors/seed-figures.json.
set -uo pipefail
M8=meta-llama/Llama-3.1-8B-Instruct
M70=meta-llama/Llama-3.1-70B-Instruct
B=(--gpu rtx-4090 --gpu-memory-gib 23.5 --gpu-memory-utilization 0.9 --max-num-batched-tokens 8192)
fail=0
json() { "$KVLAB" serve "$@" --accounting textbook --json; } # the course's arithmetic
field() { # field NAME <json: first numeric value of "NAME"
    grep -oE "\"$1\":[[:space:]]*-?[0-9.eE+]+" | head -1 | sed -E 's/.*:[[:space:]]*//'
}
near() { # near WHAT GOT WANT REL
    if awk -v g="$2" -v w="$3" -v r="$4" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(g != "" && d <= r * (w < 0 ? -w : w)) }'; then
        echo "ok    $1: $2 (course $3)"
    else
        echo "FAIL  $1: engine '$2', course $3 (rel $4)"; fail=1
    fi
}

j=$(json $M8 --gpu h100-80gb --gpu-memory-utilization 0.9)
near "8B KV bytes per token" "$(field kv_bytes_per_token <<<"$j")" 131072 0
j=$(json $M70 --gpu b200 --tensor-parallel-size 1 --max-model-len 32768)
b70=$(field kv_bytes_per_token <<<"$j")
near "70B KV bytes per token, bf16 (320 KiB)" "$b70" 327680 0
j=$(json $M70 --gpu b200 --max-model-len 32768 --kv-cache-dtype fp8)
f70=$(field kv_bytes_per_token <<<"$j")
near "70B KV bytes per token, fp8 (160 KiB)" "$f70" 163840 0
near "70B 32K conversation, bf16 (GB)" "$(awk -v b="$b70" 'BEGIN { print 32768 * b / 1e9 }')" 10.7 0.01
near "70B 32K conversation, fp8 (GB)" "$(awk -v b="$f70" 'BEGIN { print 32768 * b / 1e9 }')" 5.4 0.01

j=$(json $M8 "${B[@]}"); rc=$?
[ "$rc" -ne 0 ] || { echo "FAIL  example B should not start"; fail=1; }
grep -q '"error_kind":[[:space:]]*"max_model_len"' <<<"$j" || { echo "FAIL  example B: not the length check"; fail=1; }
grep -q 'To serve at least one request' <<<"$j" || { echo "FAIL  example B: not vLLM's message"; fail=1; }
near "example B: KV needed (GiB)" "$(field needed_gib <<<"$j")" 16.0 0.005
near "example B: available KV (GiB)" "$(field kv_cache_gib <<<"$j")" 2.83 0.01
near "example B: estimated max model length (~23,000)" "$(field estimated_max_model_len <<<"$j")" 23184 0.02
bf=$(json $M8 "${B[@]}" --max-model-len 8192 | field kv_cache_gib)
q8=$(json $M8 "${B[@]}" --max-model-len 8192 --quantization fp8 | field kv_cache_gib)
near "example B: FP8 weights multiply the pool (~3.3x)" "$(awk -v a="$q8" -v b="$bf" 'BEGIN { print a / b }')" 3.3 0.02

t8=$(json $M70 --gpu h100-80gb --tensor-parallel-size 8 --max-model-len 8192 | field kv_bytes_per_token)
t16=$(json $M70 --gpu h100-80gb --tensor-parallel-size 16 --max-model-len 8192 | field kv_bytes_per_token)
near "70B KV per GPU at tp=8" "$t8" 40960 0
near "70B KV per GPU stops shrinking past tp=8" "$t16" "$t8" 0
j=$(json $M70 --gpu h100-80gb --gpu-memory-utilization 0.9 --tensor-parallel-size 4 --max-model-len 8192)
near "70B tp=4: 8K conversations (roughly 50)" "$(field max_concurrency <<<"$j")" 52 0.15
exit $fail

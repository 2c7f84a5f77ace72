#!/usr/bin/env bash
# kvlab serve on the seed's running examples: stdout must equal the golden
# file under tests/golden/, and the exit code must be 0 (starts) or 1 (would
# not start). UPDATE_GOLDEN=1 rewrites the golden files.
set -u
: "${KVLAB:?set KVLAB to the kvlab binary}"
: "${KVLAB_SOURCE_DIR:?set KVLAB_SOURCE_DIR}"
export KVLAB_DATA_DIR="$KVLAB_SOURCE_DIR"
golden="$KVLAB_SOURCE_DIR/tests/golden"
fail=0

L8=meta-llama/Llama-3.1-8B-Instruct
L70=meta-llama/Llama-3.1-70B-Instruct
R4090="--gpu rtx-4090 --gpu-memory-gib 23.5 --gpu-memory-utilization 0.9 --max-num-batched-tokens 8192"
H100="--gpu h100-80gb --quantization fp8 --max-num-batched-tokens 8192 --max-model-len 8192"

# The golden files pin the course's figures: the textbook accounting.
TB="--accounting textbook"

check() { # name expected-exit args...
  local name=$1 want=$2; shift 2
  local out rc
  out=$("$KVLAB" "$@" 2>/tmp/kvlab-golden-err.$$)
  rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL $name: exit $rc, expected $want"; cat /tmp/kvlab-golden-err.$$; fail=1
  fi
  if [ -s /tmp/kvlab-golden-err.$$ ]; then
    echo "FAIL $name: unexpected stderr:"; cat /tmp/kvlab-golden-err.$$; fail=1
  fi
  if [ "${UPDATE_GOLDEN:-0}" = 1 ]; then
    printf '%s\n' "$out" >"$golden/$name.txt"
  elif ! diff -u "$golden/$name.txt" <(printf '%s\n' "$out"); then
    echo "FAIL $name: stdout differs from tests/golden/$name.txt"; fail=1
  fi
  rm -f /tmp/kvlab-golden-err.$$
  LAST="$out"
}

expect_in() { # name text
  case "$LAST" in *"$2"*) ;; *) echo "FAIL $1: output lacks '$2'"; fail=1 ;; esac
}

# The running example: the length check fails.
check serve_4090_bf16_no_max_len 1 serve $L8 $R4090 $TB
expect_in done-when "model's max seq len (131072), (16.0 GiB KV cache is needed"
expect_in done-when "available KV cache memory (2.83 GiB)"
est=$(printf '%s\n' "$LAST" | sed -n 's/.*estimated maximum model length is \([0-9]*\)\..*/\1/p' | head -1)
if [ -z "$est" ] || [ $(( (est - 23184) * 1000 / 23184 )) -gt 5 ] || [ $(( (23184 - est) * 1000 / 23184 )) -gt 5 ]; then
  echo "FAIL done-when: estimated max model len '$est' not within 0.5% of 23184"; fail=1
fi
# where max_model_len came from, and fixes that start only at a shorter length say which
expect_in default-len "max_model_len 131,072 (the model's default: no --max-model-len given)"
expect_in fp8-kv-paired "--kv-cache-dtype fp8 --max-model-len 46384  starts at that length: 46,400 tokens"
# 70B in bf16 on one H100: the weights alone do not fit; quantized weights, then 2 and 4 GPUs
check serve_h100_70b_bf16_weights_oom 1 serve $L70 --gpu h100-80gb $TB
expect_in weights-oom "Would not start (weights_oom)"
expect_in tp2-paired "--tensor-parallel-size 2 --max-model-len"
expect_in tp4 "--tensor-parallel-size 4                        starts: 478,848 tokens"
check serve_4090_bf16_8k 0 serve $L8 $R4090 --max-model-len 8192 $TB
expect_in done-when "Maximum concurrency for 8,192 tokens per request: 2.83x"
check serve_4090_fp8_weights_8k 0 serve $L8 $R4090 --max-model-len 8192 --quantization fp8 $TB
check serve_h100_70b_fp8_util090 1 serve $L70 $H100 --gpu-memory-utilization 0.9 $TB
expect_in no-memory "No available memory for the cache blocks"
check serve_h100_70b_fp8_util092 1 serve $L70 $H100 --gpu-memory-utilization 0.92 $TB
check serve_h100_70b_fp8_util096 0 serve $L70 $H100 --gpu-memory-utilization 0.96 $TB
check serve_2xh100_70b_fp8_tp2 0 serve $L70 $H100 --gpu-memory-utilization 0.9 --tensor-parallel-size 2 $TB
expect_in done-when "Maximum concurrency for 8,192 tokens per request: 26.47x"
check serve_h100_70b_awq 0 serve $L70 --gpu h100-80gb --quantization awq --gpu-memory-utilization 0.9 \
  --max-num-batched-tokens 8192 --max-model-len 8192 $TB
# A pasted command line, with flags that do not touch memory.
check serve_pasted_vllm_line 0 serve vllm serve $L8 --host 0.0.0.0 --port 8000 --served-model-name llama \
  --trust-remote-code --max-model-len 16k --gpu h100 $TB
check serve_tp2_json 0 serve $L70 $H100 --gpu-memory-utilization 0.9 --tensor-parallel-size 2 --json $TB
expect_in json '"kv_cache_tokens":'
check serve_auto_fit 0 serve $L8 $R4090 --max-model-len auto $TB
check serve_free_memory 1 serve $L8 --gpu rtx-4090 --gpu-used-gib 4 --max-model-len 8192 $TB
check serve_gemma3_sliding 0 serve google/gemma-3-27b-it --gpu h100 --max-model-len 32k $TB
check serve_deepseek_v3_mla 0 serve deepseek-ai/DeepSeek-V3 --gpu h200 --tensor-parallel-size 8 $TB
check models 0 models
check gpus 0 gpus

[ $fail = 0 ] && echo "all serve golden checks passed"
exit $fail

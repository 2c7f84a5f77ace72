#!/usr/bin/env bash
# Bad input to kvlab serve / models / gpus: exit 2, nothing on stdout, exactly
# one clear line on stderr that contains the expected words. Never a crash.
set -u
: "${KVLAB:?set KVLAB to the kvlab binary}"
: "${KVLAB_SOURCE_DIR:?set KVLAB_SOURCE_DIR}"
export KVLAB_DATA_DIR="$KVLAB_SOURCE_DIR"
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
L8=meta-llama/Llama-3.1-8B-Instruct

bad() { # expected-substring args...
  local want=$1; shift
  "$KVLAB" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [ $rc != 2 ] || [ -s "$tmp/out" ] || [ "$lines" != 1 ] || ! grep -qF -- "$want" "$tmp/err"; then
    echo "FAIL (exit $rc, $lines stderr lines) kvlab $*"; echo "  wanted: $want"; sed 's/^/  stderr: /' "$tmp/err"
    sed 's/^/  stdout: /' "$tmp/out" | head -3; fail=1
  fi
}

bad "no MODEL given" serve
bad "no MODEL given" serve --gpu h100
bad "--gpu-used-gib 100: other processes cannot hold all of the card's 79.20 GiB" serve meta-llama/Llama-3.1-8B-Instruct --gpu h100 --gpu-used-gib 100
bad "unknown model 'nobody/nothing'" serve nobody/nothing
bad "unknown model 'meta-llama/Llama-3.1-8B' (did you mean meta-llama/Llama-3.1-8B-Instruct?)" serve meta-llama/Llama-3.1-8B
bad "no such file or folder: $tmp/missing/config.json" serve "$tmp/missing/config.json"
bad "vllm serve: error: unrecognized arguments: --max-model-length (unknown flag; did you mean --max-model-len?)" serve $L8 --max-model-length 8192
bad "vllm serve: error: unrecognized arguments: --gpu-memory-utilisation (unknown flag; did you mean --gpu-memory-utilization?)" serve $L8 --gpu-memory-utilisation 0.9
bad "did you mean: h100-80gb-sxm" serve $L8 --gpu h100-90gb
bad "unknown GPU 'potato'" serve $L8 --gpu potato
bad "--gpu-memory-utilization must be in (0, 1], got 0" serve $L8 --gpu-memory-utilization 0
bad "--gpu-memory-utilization must be in (0, 1], got 1.5" serve $L8 --gpu-memory-utilization 1.5
bad "--gpu-memory-utilization: 'lots' is not a number" serve $L8 --gpu-memory-utilization lots
bad "--max-model-len must be a positive length, auto or -1, got -5" serve $L8 --max-model-len -5
bad "--max-model-len: 'long' is not a" serve $L8 --max-model-len long
bad "--max-num-seqs must be a positive whole number, got -1" serve $L8 --max-num-seqs -1
bad "--gpu-memory-gib must be a positive number of GiB, got -1" serve $L8 --gpu-memory-gib -1
bad "--activation-gib must be a non-negative number of GiB, got -2" serve $L8 --activation-gib -2
bad "--limit-mm-per-prompt: not a JSON object" serve $L8 --limit-mm-per-prompt '{"image":'
bad "--limit-mm-per-prompt: 'video' needs a count >= 0" serve $L8 --limit-mm-per-prompt '{"video":-1}'
bad "--limit-mm-per-prompt: expected JSON or modality=N" serve $L8 --limit-mm-per-prompt image
bad "--mm-processor-kwargs: max_pixels must be a positive number of pixels" serve $L8 --mm-processor-kwargs '{"max_pixels":0}'
bad "vllm serve: error: unrecognized arguments: --skip-mm-profiling (vLLM 0.10.0 has no such flag; 0.10.1-0.33.0 have it)" serve $L8 --skip-mm-profiling --vllm-version 0.10.0
bad "Total number of attention heads (64) must be divisible by tensor parallel size (3)." \
  serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 3
bad "vllm serve: error: unrecognized arguments: --frobnicate (unknown flag: no vLLM release from 0.6.4 to" serve $L8 --frobnicate 3
bad "--max-model-len needs a value" serve $L8 --max-model-len
bad "vllm serve: error: unrecognized arguments: extra (MODEL is already" serve $L8 extra
bad "User-specified max_model_len (1000000) is greater than the derived max_model_len (max_position_embeddings=131072.0 or model_max_length=None in model's config.json). To allow" serve $L8 --max-model-len 1m
# --disable-sliding-window caps the length at the window (Gemma 3's length is not scaled: a whole number)
bad "derived max_model_len (sliding_window=1024 or model_max_length=None in model's config.json)" serve google/gemma-3-27b-it --disable-sliding-window --max-model-len 32768
bad "must be greater than or equal to max_num_seqs (4096)" serve $L8 --max-num-batched-tokens 2048 --max-num-seqs 4096
bad "vllm serve: error: argument --kv-cache-dtype: invalid choice: 'int2' (choose from 'auto', 'float16', 'bfloat16', 'fp8'," serve $L8 --kv-cache-dtype int2
bad "vLLM has no float32 KV cache" serve $L8 --kv-cache-dtype float32
bad "kvlab cannot size its blocks yet" serve $L8 --kv-cache-dtype nvfp4
bad "decimals are not allowed with binary suffixes" serve $L8 --max-model-len 1.5K
bad "one pipeline stage" serve $L8 --pipeline-parallel-size 2
bad "does not match the quantization method" serve deepseek-ai/DeepSeek-V3 --quantization awq
# --quantization awq/gptq on plain weights: vLLM's loader finds no AWQ/GPTQ config (the textbook sizes one)
bad "Cannot find the config file for awq (mistralai/Mixtral-8x7B-Instruct-v0.1 has no quantization_config" \
  serve mistralai/Mixtral-8x7B-Instruct-v0.1 --quantization awq
bad "Cannot find the config file for gptq" serve $L8 --quantization gptq --vllm-version 0.6.4
"$KVLAB" serve mistralai/Mixtral-8x7B-Instruct-v0.1 --quantization awq --accounting textbook >/dev/null 2>&1 ||
  { echo "FAIL: --quantization awq under textbook: exit $?"; fail=1; }
# bfloat16 on a T4 (compute capability 7.5): vLLM's worker refuses it
bad "Bfloat16 is only supported on GPUs with compute capability of at least 8.0." \
  serve meta-llama/Llama-3.2-1B-Instruct --gpu t4 --dtype bfloat16
# how to hold memory means nothing without --allocate
bad "--hold needs --allocate" serve $L8 --hold 5
bad "--no-placeholders needs --allocate" serve $L8 --no-placeholders
# config.json errors name the file and the field
printf '{"num_hidden_layers": 2, "hidden_size": 64' >"$tmp/broken.json"
bad "$tmp/broken.json: not valid JSON" serve "$tmp/broken.json"
printf '{"hidden_size": 64, "num_attention_heads": 4}' >"$tmp/config.json"
bad "$tmp/config.json: required field \"num_hidden_layers\" is missing" serve "$tmp"
printf '{"num_hidden_layers": "many"}' >"$tmp/config.json"
bad "field \"num_hidden_layers\" must be a whole number" serve "$tmp/config.json"
mkdir -p "$tmp/empty"
bad "folder holds no config.json" serve "$tmp/empty"
bad "unexpected argument 'extra'" models extra
bad "unexpected argument '--x'" gpus --x
# which rules: an unknown release, a bad accounting
bad "--vllm-version 0.5.4: kvlab models vLLM 0.6.4 to 0.33.0" serve $L8 --vllm-version 0.5.4
bad "--vllm-version 0.40: unknown release" serve $L8 --vllm-version 0.40
bad "--vllm-version 'latest' is not a vLLM version" serve $L8 --vllm-version latest
bad "--accounting must be release or textbook" serve $L8 --accounting course
bad "has no auto-fit (from 0.14.0)" serve $L8 --gpu h100 --vllm-version 0.11 --max-model-len auto
# config.json as transformers reads it
printf '{"num_hidden_layers": 2, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 7, "intermediate_size": 8, "vocab_size": 10, "max_position_embeddings": 64}' >"$tmp/config.json"
bad "is not a multiple of num_key_value_heads (7)" serve "$tmp/config.json" --gpu h100
printf '{"num_hidden_layers": 2} trailing' >"$tmp/config.json"
bad "text after the JSON object" serve "$tmp/config.json" --gpu h100
printf '{"model_type": "llava", "text_config": {"model_type": "mystery"}}' >"$tmp/config.json"
bad "model_type 'mystery' has no class defaults" serve "$tmp/config.json" --gpu h100
# not a regular file: refused at once, never read or waited on
timeout 10 "$KVLAB" serve /dev/zero >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && grep -q "/dev/zero: is a device, not a regular file" "$tmp/err" || { echo "FAIL: serve /dev/zero (exit $rc)"; cat "$tmp/err"; fail=1; }
mkfifo "$tmp/fifo.json" && { timeout 10 "$KVLAB" serve "$tmp/fifo.json" >/dev/null 2>"$tmp/err"; rc=$?
  [ $rc = 2 ] && grep -q "is a pipe (FIFO), not a regular file" "$tmp/err" || { echo "FAIL: serve FIFO (exit $rc)"; cat "$tmp/err"; fail=1; }; }
mkdir -p "$tmp/hf/models--org--name/refs" "$tmp/hf/models--org--name/snapshots" && mkfifo "$tmp/hf/models--org--name/refs/main" && {
  HF_HUB_CACHE="$tmp/hf" timeout 10 "$KVLAB" serve org/name >/dev/null 2>"$tmp/err"; rc=$?
  [ $rc = 2 ] && grep -q "refs/main: is a pipe (FIFO)" "$tmp/err" || { echo "FAIL: HF refs/main FIFO (exit $rc)"; cat "$tmp/err"; fail=1; }; }
# a broken data dir is reported, not crashed on
KVLAB_DATA_DIR="$tmp/empty" bad "cannot open the GPU catalogue" serve "$KVLAB_SOURCE_DIR/assets/models/$L8/config.json" --gpu h100

# Accepted with a note (exit 0): vLLM flags that do not touch memory.
out=$("$KVLAB" serve $L8 --gpu h100 --port 8000 --api-key k --seed 1 --disable-log-requests --swap-space 4 \
      --max-model-len 8192 --vllm-version 0.16 2>&1)
rc=$?
if [ $rc != 0 ] || ! grep -q "note: --swap-space does not change the memory plan" <<<"$out"; then
  echo "FAIL: ignored flags (exit $rc)"; fail=1
fi

# Real vLLM flags people paste: accepted with a note each (exit 0); the ones
# that change memory in ways kvlab does not model say what they change.
out=$("$KVLAB" serve vllm serve $L8 --gpu h100 --max-model-len 8k --limit-mm-per-prompt '{"image":0}' \
      --enable-expert-parallel -O3 --compilation-config '{"level":3}' --max-cudagraph-capture-size 256 \
      --async-scheduling --long-prefill-token-threshold 512 --max-num-partial-prefills 2 --vllm-version 0.26 \
      --speculative-config '{"method":"ngram","num_speculative_tokens":3}' --kv-offloading-size 8 --enable-lora \
      --max-lora-rank 64 --hf-overrides '{}' --model-impl vllm --calculate-kv-scales 2>&1)
rc=$?
for want in "--speculative-config is accepted but not modelled: it changes a draft model" \
            "--enable-lora: LoRA slots (max_loras 1 x rank 64) take" \
            "--kv-offloading-size is accepted but not modelled" "--async-scheduling does not change the memory plan" \
            "--compilation-config is accepted but not modelled"; do
  if [ $rc != 0 ] || ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL: real flags (exit $rc): no '$want'"; sed 's/^/  /' <<<"$out" | head -5; fail=1
  fi
done
# old flags and old releases: vLLM would reject them, so kvlab does (exit 2)
bad "vllm serve: error: unrecognized arguments: --max-seq-len-to-capture (vLLM 0.33.0 has no such flag; 0.6.4-0.10.2 have it)" serve $L8 --max-seq-len-to-capture 8192
bad "vllm serve: error: unrecognized arguments: --swap-space (vLLM 0.33.0 has no such flag; 0.6.4-0.17.1 have it)" serve $L8 --swap-space 4
bad "vllm serve: error: unrecognized arguments: --async-scheduling (vLLM 0.9.2 has no such flag; 0.10.0-0.33.0 have it)" serve $L8 --async-scheduling --vllm-version 0.9.2
bad "vllm serve: error: unrecognized arguments: --cuda-graph-sizes (vLLM 0.13 has no such flag; 0.9.0-0.12.0 have it)" serve $L8 --cuda-graph-sizes 64 --vllm-version 0.13
bad "vllm serve: error: unrecognized arguments: -O (vLLM 0.6.4 has no such flag; 0.6.5 and later have it)" serve $L8 -O3 --vllm-version 0.6.4
bad "--optimization-level (-O) must be 0, 1, 2 or 3" serve $L8 --optimization-level 7
bad "--config: serve.yaml: no such file" serve $L8 --config serve.yaml
# under textbook accounting there is no release to check against
"$KVLAB" serve $L8 --gpu h100 --max-model-len 8192 --swap-space 4 --accounting textbook >/dev/null 2>&1 ||
  { echo "FAIL: --swap-space under textbook: exit $?"; fail=1; }

# one usage text: an unknown option of the app is one line pointing at --help
# (it printed its own usage block, which differed from kvlab --help's)
bad "kvlab: unknown option '--bogus' (try kvlab --help)" --bogus
bad "kvlab: unknown option '--nope' (try kvlab --help)" --ascii --nope
"$KVLAB" --help >"$tmp/help" 2>&1
for app_help in "--ascii --help" "--lesson 2 -h"; do
  "$KVLAB" $app_help 2>&1 | cmp -s - "$tmp/help" || { echo "FAIL: kvlab $app_help differs from kvlab --help"; fail=1; }
done

[ $fail = 0 ] && echo "all serve error checks passed"
exit $fail

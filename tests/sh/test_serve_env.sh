#!/usr/bin/env bash
# What changes the plan besides the flags: --hf-overrides (applied to the
# model's config.json before planning, as vLLM's config/model.py does) and
# the VLLM_* variables kvlab models (README "Environment").
set -u
: "${KVLAB:?set KVLAB to the kvlab binary}"
: "${KVLAB_SOURCE_DIR:?set KVLAB_SOURCE_DIR}"
export KVLAB_DATA_DIR="$KVLAB_SOURCE_DIR"
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
unset VLLM_ALLOW_LONG_MAX_MODEL_LEN VLLM_USE_FLASHINFER_SAMPLER VLLM_USE_V2_MODEL_RUNNER VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS VLLM_USE_V1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
L8=meta-llama/Llama-3.1-8B-Instruct
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
run() { # out-file expected-exit args...
  local f=$1 want=$2; shift 2
  "$@" >"$f" 2>"$tmp/err"
  local rc=$?
  [ "$rc" = "$want" ] || { echo "FAIL: exit $rc (wanted $want): $*: $(cat "$tmp/err")"; fail=1; }
}

# VLLM_ALLOW_LONG_MAX_MODEL_LEN: refused without, a warning with (as vLLM)
run "$tmp/o" 2 "$KVLAB" serve $L8 --max-model-len 200000 --gpu h100
grep -q "set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" "$tmp/err" || { echo "FAIL: the refusal names the variable"; fail=1; }
run "$tmp/o" 2 env VLLM_ALLOW_LONG_MAX_MODEL_LEN=0 "$KVLAB" serve $L8 --max-model-len 200000 --gpu h100
run "$tmp/a.json" 0 env VLLM_ALLOW_LONG_MAX_MODEL_LEN=" True " "$KVLAB" serve $L8 --max-model-len 200000 --gpu h100 --json
[ "$(field "$tmp/a.json" max_model_len)" = 200000 ] || { echo "FAIL: the length as given"; fail=1; }
grep -q "WARNING User-specified max_model_len (200000) is greater than the derived max_model_len.*must be used with extreme caution" "$tmp/a.json" ||
  { echo "FAIL: vLLM's warning in the log"; fail=1; }
grep -q "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 from the environment" "$tmp/a.json" || { echo "FAIL: a note says where it came from"; fail=1; }

# --hf-overrides: the config as vLLM sees it
run "$tmp/b.json" 0 "$KVLAB" serve $L8 --hf-overrides '{"max_position_embeddings": 262144}' --max-model-len 200000 --gpu h100 --json
[ "$(field "$tmp/b.json" model_max_model_len)" = 262144 ] || { echo "FAIL: max_position_embeddings overridden"; fail=1; }
run "$tmp/c.json" 0 "$KVLAB" serve $L8 --max-model-len 8192 --gpu h100 --json
run "$tmp/d.json" 0 "$KVLAB" serve $L8 --hf-overrides '{"num_key_value_heads": 4}' --max-model-len 8192 --gpu h100 --json
[ "$(field "$tmp/d.json" kv_bytes_per_token)" = $(( $(field "$tmp/c.json" kv_bytes_per_token) / 2 )) ] ||
  { echo "FAIL: num_key_value_heads 4 halves the KV per token"; fail=1; }
run "$tmp/g" 0 "$KVLAB" serve google/gemma-3-27b-it --hf-overrides '{"text_config": {"sliding_window": 512}}' \
  --max-model-len 32768 --gpu h100
grep -q "slide over 512 tokens" "$tmp/g" || { echo "FAIL: an object is merged into text_config"; fail=1; }
run "$tmp/o" 2 "$KVLAB" serve $L8 --hf-overrides '[1, 2]' --gpu h100
grep -q "\-\-hf-overrides must be a JSON object" "$tmp/err" || { echo "FAIL: a non-object is refused: $(cat "$tmp/err")"; fail=1; }
run "$tmp/o" 2 "$KVLAB" serve $L8 --hf-overrides '{"num_attention_heads": 33}' --gpu h100

# VLLM_USE_FLASHINFER_SAMPLER: the profile's sampler, unless the flag says otherwise
run "$tmp/e.json" 0 env VLLM_USE_FLASHINFER_SAMPLER=0 "$KVLAB" serve $L8 --max-model-len 8192 --gpu h100 --json
[ "$(field "$tmp/e.json" flashinfer_sampler)" = False ] || { echo "FAIL: VLLM_USE_FLASHINFER_SAMPLER=0"; fail=1; }
run "$tmp/f.json" 0 env VLLM_USE_FLASHINFER_SAMPLER=0 "$KVLAB" serve $L8 --max-model-len 8192 --gpu h100 --flashinfer-sampler --json
[ "$(field "$tmp/f.json" flashinfer_sampler)" = True ] || { echo "FAIL: the flag wins over the variable"; fail=1; }
run "$tmp/o" 2 env VLLM_USE_FLASHINFER_SAMPLER=yes "$KVLAB" serve $L8 --gpu h100
grep -q "invalid literal for int()" "$tmp/err" || { echo "FAIL: a value vLLM's int() refuses: $(cat "$tmp/err")"; fail=1; }

# VLLM_USE_V2_MODEL_RUNNER and VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
# (envs.py; config/vllm.py use_v2_model_runner, gpu_worker.py
# determine_available_memory): the runner, and whether the graph estimate is
# subtracted, in the releases that read them.
kvb() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["kv_cache_bytes"])' "$1"; }
cgb() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cudagraph_bytes"])' "$1"; }
S="serve $L8 --max-model-len 8192 --gpu h100 --json"
run "$tmp/v30.json" 0 "$KVLAB" $S --vllm-version 0.30.0
run "$tmp/v30off.json" 0 env VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 "$KVLAB" $S --vllm-version 0.30.0
[ "$(kvb "$tmp/v30off.json")" -gt "$(kvb "$tmp/v30.json")" ] || { echo "FAIL: =0 on 0.30 leaves the estimate in the pool"; fail=1; }
python3 -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:3]); d=b["kv_cache_bytes"]-a["kv_cache_bytes"]; sys.exit(0 if abs(d-a["cudagraph_bytes"])<(1<<20) else 1)' \
  "$tmp/v30.json" "$tmp/v30off.json" || { echo "FAIL: =0 on 0.30 adds back exactly the graph estimate"; fail=1; }
grep -q "WARNING CUDA graph memory profiling is disabled (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0)" "$tmp/v30off.json" ||
  { echo "FAIL: 0.30's warning when the estimate is off"; fail=1; }
run "$tmp/v19.json" 0 "$KVLAB" $S --vllm-version 0.19.0
run "$tmp/v19on.json" 0 env VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 "$KVLAB" $S --vllm-version 0.19.0
[ "$(kvb "$tmp/v19on.json")" -lt "$(kvb "$tmp/v19.json")" ] || { echo "FAIL: =1 on 0.19 subtracts the estimate"; fail=1; }
grep -q "CUDA graph memory profiling is enabled (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1). This will become" "$tmp/v19on.json" ||
  { echo "FAIL: 0.19's opt-in wording"; fail=1; }
run "$tmp/v17on.json" 0 env VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 "$KVLAB" $S --vllm-version 0.17.0
run "$tmp/v17.json" 0 "$KVLAB" $S --vllm-version 0.17.0
[ "$(kvb "$tmp/v17on.json")" = "$(kvb "$tmp/v17.json")" ] || { echo "FAIL: 0.17 has no such variable"; fail=1; }
# 0.26 runs Llama on runner V2, whose estimate is 0; runner V1 subtracts its own
run "$tmp/v26.json" 0 "$KVLAB" $S --vllm-version 0.26.0
run "$tmp/v26v1.json" 0 env VLLM_USE_V2_MODEL_RUNNER=0 "$KVLAB" $S --vllm-version 0.26.0
[ "$(field "$tmp/v26.json" model_runner)" = V2 ] && [ "$(field "$tmp/v26v1.json" model_runner)" = V1 ] ||
  { echo "FAIL: VLLM_USE_V2_MODEL_RUNNER=0 picks runner V1 on 0.26"; fail=1; }
[ "$(kvb "$tmp/v26v1.json")" -lt "$(kvb "$tmp/v26.json")" ] || { echo "FAIL: runner V1 on 0.26 subtracts its estimate"; fail=1; }
grep -q "Estimated CUDA graph memory" "$tmp/v26v1.json" || { echo "FAIL: runner V1 logs its estimate"; fail=1; }
run "$tmp/v11.json" 0 env VLLM_USE_V2_MODEL_RUNNER=1 "$KVLAB" $S --vllm-version 0.11.0
[ "$(field "$tmp/v11.json" model_runner)" = V1 ] || { echo "FAIL: 0.11 has no runner V2 to opt into"; fail=1; }
run "$tmp/v14.json" 0 env VLLM_USE_V2_MODEL_RUNNER=1 "$KVLAB" $S --vllm-version 0.14.0
[ "$(field "$tmp/v14.json" model_runner)" = V2 ] || { echo "FAIL: 0.14 opts into runner V2"; fail=1; }
run "$tmp/o" 2 env VLLM_USE_V2_MODEL_RUNNER=true "$KVLAB" serve $L8 --gpu h100
grep -q "VLLM_USE_V2_MODEL_RUNNER: ValueError: invalid literal for int()" "$tmp/err" || { echo "FAIL: int() refuses 'true'"; fail=1; }
# VLLM_USE_V1=0: the V0 engine where the release ships both (0.8.0-0.10.1.x; was ignored)
run "$tmp/e1.json" 0 "$KVLAB" serve $L8 --max-model-len 8192 --gpu h100 --vllm-version 0.9.2 --json
run "$tmp/e0.json" 0 env VLLM_USE_V1=0 "$KVLAB" serve $L8 --max-model-len 8192 --gpu h100 --vllm-version 0.9.2 --json
[ "$(field "$tmp/e1.json" engine)" = V1 ] && [ "$(field "$tmp/e0.json" engine)" = V0 ] ||
  { echo "FAIL: VLLM_USE_V1=0 runs V0 under 0.9.2"; fail=1; }
grep -q "VLLM_USE_V1=0: vLLM 0.9.2 runs its V0 engine" "$tmp/e0.json" || { echo "FAIL: the note says why V0"; fail=1; }
run "$tmp/e2.json" 0 env VLLM_USE_V1=0 "$KVLAB" serve $L8 --max-model-len 8192 --gpu h100 --vllm-version 0.33.0 --json
[ "$(field "$tmp/e2.json" engine)" = V1 ] || { echo "FAIL: 0.33 has one engine"; fail=1; }
[ $fail = 0 ] && echo "all env and --hf-overrides checks passed"
exit $fail

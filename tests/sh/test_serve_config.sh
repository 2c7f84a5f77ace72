#!/usr/bin/env bash
# vLLM's --config FILE.yaml on kvlab serve: keys are flag names, the line
# wins over the file, booleans, lists and mappings as vLLM's
# load_config_file turns them into arguments, and vLLM's refusals.
. "$(dirname "$0")/cli_lib.sh"
cli_need_python

cat >"$tmp/serve.yaml" <<'YAML'
# a vLLM serve config: flag names as keys
model: meta-llama/Llama-3.1-8B-Instruct
max-model-len: 16384
gpu_memory_utilization: 0.85
tensor-parallel-size: 2
enforce-eager: true
enable-prefix-caching: false
port: 8001
served-model-name:
  - llama
  - l8
compilation-config:
  cudagraph_mode: PIECEWISE
  level: 3
YAML
"$KVLAB" serve --config "$tmp/serve.yaml" --gpu h100 --json >"$tmp/a.json" 2>"$tmp/err"
rc=$?
[ $rc = 0 ] || { echo "FAIL: serve --config exit $rc: $(cat "$tmp/err")"; fail=1; }
[ "$(field "$tmp/a.json" max_model_len)" = 16384 ] || { echo "FAIL: max-model-len from the file"; fail=1; }
[ "$(field "$tmp/a.json" gpu_memory_utilization)" = 0.85 ] || { echo "FAIL: gpu_memory_utilization from the file"; fail=1; }
[ "$(field "$tmp/a.json" tensor_parallel_size)" = 2 ] || { echo "FAIL: tensor-parallel-size from the file"; fail=1; }
[ "$(field "$tmp/a.json" enforce_eager)" = True ] || { echo "FAIL: enforce-eager: true"; fail=1; }
[ "$(field "$tmp/a.json" enable_prefix_caching)" = False ] || { echo "FAIL: enable-prefix-caching: false is --no-..."; fail=1; }
[ "$(field "$tmp/a.json" model)" = $L8 ] || { echo "FAIL: model from the file"; fail=1; }
grep -q "compilation-config is accepted but not modelled" "$tmp/a.json" || { echo "FAIL: the mapping reaches --compilation-config"; fail=1; }
# the line wins over the file, wherever --config stands
"$KVLAB" serve $L8 --max-model-len 8192 --config "$tmp/serve.yaml" --gpu h100 --json >"$tmp/b.json" 2>"$tmp/err"
[ "$(field "$tmp/b.json" max_model_len)" = 8192 ] || { echo "FAIL: --max-model-len on the line should win: $(cat "$tmp/err")"; fail=1; }
"$KVLAB" serve vllm serve $L8 --config="$tmp/serve.yaml" --no-enforce-eager --gpu h100 --json >"$tmp/c.json" 2>"$tmp/err"
[ "$(field "$tmp/c.json" enforce_eager)" = False ] || { echo "FAIL: --no-enforce-eager on the line should win: $(cat "$tmp/err")"; fail=1; }
# the same plan as the flags typed out
"$KVLAB" serve $L8 --max-model-len 16384 --gpu-memory-utilization 0.85 -tp 2 --enforce-eager \
  --no-enable-prefix-caching --gpu h100 --json >"$tmp/d.json" 2>/dev/null
for k in kv_cache_tokens num_blocks weights_bytes; do
  [ "$(field "$tmp/a.json" $k)" = "$(field "$tmp/d.json" $k)" ] || { echo "FAIL: $k differs from the typed-out flags"; fail=1; }
done

bad() { # expected args...
  local want=$1; shift
  "$KVLAB" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc != 2 ] || [ -s "$tmp/out" ] || [ "$(wc -l <"$tmp/err")" != 1 ] || ! grep -qF -- "$want" "$tmp/err"; then
    echo "FAIL (exit $rc) kvlab $*"; echo "  wanted: $want"; sed 's/^/  stderr: /' "$tmp/err"; fail=1
  fi
}
printf 'max-model-len: 8192\n' >"$tmp/c.json.txt"
bad "Config file must be of a yaml/yml type. txt supplied" serve $L8 --config "$tmp/c.json.txt"
bad "More than one config file specified!" serve $L8 --config "$tmp/serve.yaml" --config "$tmp/serve.yaml"
bad "No config file specified!" serve $L8 --config
bad "no such file" serve $L8 --config "$tmp/missing.yaml"
printf -- '- a\n- b\n' >"$tmp/list.yaml"
bad "must be a YAML mapping" serve $L8 --config "$tmp/list.yaml"
printf 'max-model-len: [1, 2\n' >"$tmp/broken.yaml"
bad "not YAML" serve $L8 --config "$tmp/broken.yaml"
printf 'frobnicate: 3\n' >"$tmp/unknown.yaml"
bad "unrecognized arguments: --frobnicate" serve $L8 --config "$tmp/unknown.yaml"
printf 'num-scheduler-steps: 8\n' >"$tmp/old.yaml"
bad "unrecognized arguments: --num-scheduler-steps (vLLM 0.33.0 has no such flag" serve $L8 --config "$tmp/old.yaml"
"$KVLAB" serve $L8 --config "$tmp/old.yaml" --vllm-version 0.6.4 --gpu h100 >/dev/null 2>"$tmp/err"
[ $? -le 1 ] || { echo "FAIL: num-scheduler-steps in a 0.6.4 config: $(cat "$tmp/err")"; fail=1; }
# "key: false" is --no-key only where the release's parser has that form;
# 0.6.4's store_true --enable-prefix-caching has none, so the key is dropped
printf 'enable-prefix-caching: false\nenforce-eager: false\n' >"$tmp/off.yaml"
for v in 0.6.4 0.8.5 0.33.0; do
  "$KVLAB" serve $L8 --config "$tmp/off.yaml" --vllm-version $v --gpu h100 --max-model-len 8192 --json >"$tmp/off.json" 2>"$tmp/err" ||
    { echo "FAIL: false keys in a $v config: $(cat "$tmp/err")"; fail=1; continue; }
  [ "$(field "$tmp/off.json" enable_prefix_caching)" = False ] || { echo "FAIL: prefix caching on under $v"; fail=1; }
done
[ $fail = 0 ] && echo "all --config checks passed"
exit $fail

#!/usr/bin/env bash
# The JSON of kvlab serve and kvlab simulate against docs/json-schema.md:
# schema_version is the page's, every key printed is documented there, byte
# counts are whole numbers, kv_cache_tokens is the figure of the "GPU KV
# cache size" log line for every catalogue model under releases on both sides
# of 0.21 (where vLLM changed how that line is computed), and device_name is
# the catalogue's torch name.
. "$(dirname "$0")/cli_lib.sh"
cli_need_python

# serve: every model x a few releases, one JSON object per line into a file.
"$KVLAB" models | awk 'NR > 1 && $1 ~ /\// {print $1}' >"$tmp/models"
[ -s "$tmp/models" ] || { echo "FAIL: kvlab models listed nothing"; exit 1; }
while read -r model; do
  for v in 0.20.0 0.33.0; do
    for gpu in h100-80gb; do
      out=$("$KVLAB" serve "$model" --gpu "$gpu" --max-model-len 4096 --vllm-version "$v" --json 2>"$tmp/err")
      rc=$?
      if [ $rc -gt 1 ]; then
        echo "FAIL: serve $model --gpu $gpu --vllm-version $v exit $rc: $(cat "$tmp/err")"; fail=1; continue
      fi
      printf '%s\n' "$out" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' >>"$tmp/serve.jsonl" ||
        { echo "FAIL: serve $model --vllm-version $v: not JSON"; fail=1; }
    done
  done
done <"$tmp/models"
"$KVLAB" serve meta-llama/Llama-3.1-70B-Instruct --gpu rtx-4090 --max-model-len 8192 --json |
  python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' >>"$tmp/serve.jsonl"
for v in 0.9.2 0.21.0; do
  "$KVLAB" serve google/gemma-3-27b-it --gpu h100 --max-model-len 32768 --vllm-version $v --json |
    python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' >>"$tmp/serve.jsonl"
done
"$KVLAB" serve Qwen/Qwen2.5-7B-Instruct --gpu t4 --dtype half --json |
  python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' >>"$tmp/serve.jsonl"
"$KVLAB" serve meta-llama/Llama-3.1-8B-Instruct --gpu h100 --vllm-version 0.6.4 --json |
  python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' >>"$tmp/serve.jsonl"

"$KVLAB" simulate google/gemma-3-27b-it --gpu h100 --max-model-len 32768 \
  --trace gen:requests=20,rate=5,prompt=500,output=20,seed=1 --json >"$tmp/sim.json" 2>/dev/null ||
  { echo "FAIL: simulate --json"; fail=1; }
"$KVLAB" serve google/gemma-3-27b-it --gpu h100 --max-model-len 32768 --json >"$tmp/serve_gemma.json"
# the split's objects (--disaggregate): their keys are documented too
"$KVLAB" simulate meta-llama/Llama-3.1-8B-Instruct --gpu h100 --trace gen:requests=10,rate=5,prompt=500,output=20,seed=1 \
  --disaggregate 1:2 --metrics --json >"$tmp/sim_split.json" 2>/dev/null || { echo "FAIL: simulate --disaggregate --json"; fail=1; }
"$KVLAB" serve meta-llama/Llama-3.1-8B-Instruct --gpu h100 --disaggregate 1:1 --json >"$tmp/serve_split.json" ||
  { echo "FAIL: serve --disaggregate --json"; fail=1; }

python3 - "$KVLAB_SOURCE_DIR" "$tmp" <<'EOF' || fail=1
import json, re, sys
src, tmp = sys.argv[1], sys.argv[2]
doc = open(f"{src}/docs/json-schema.md").read()
bad = []
m = re.search(r"^schema_version: (\d+)$", doc, re.M)
version = int(m.group(1)) if m else None
documented = set(re.findall(r"`([a-z_0-9]+)`", doc))
gpus = {g["id"]: g for g in json.load(open(f"{src}/assets/gpus.json"))}

def check_common(o, what):
    if o.get("schema_version") != version or not isinstance(o.get("schema_version"), int):
        bad.append(f"{what}: schema_version {o.get('schema_version')!r}, docs/json-schema.md says {version}")
    for k, v in o.items():
        if k not in documented:
            bad.append(f"{what}: key {k!r} is not in docs/json-schema.md")
        if k.endswith("_bytes") and v is not None and not isinstance(v, int):
            bad.append(f"{what}: {k} = {v!r} is not a whole number")

plans = [json.loads(l) for l in open(f"{tmp}/serve.jsonl")]
logged = 0
for o in plans:
    what = f"serve {o.get('model')} {o.get('gpu')} {o.get('vllm_version')}"
    check_common(o, what)
    for t in o["terms"]:
        if not isinstance(t.get("bytes"), int):
            bad.append(f"{what}: term {t['name']} bytes {t.get('bytes')!r}")
        for k in t:
            if k not in documented:
                bad.append(f"{what}: term key {k!r} is not in docs/json-schema.md")
    for f in o["fixes"]:
        if not isinstance(f.get("kv_cache_bytes"), int):
            bad.append(f"{what}: fix kv_cache_bytes {f.get('kv_cache_bytes')!r}")
        for k in f:
            if k not in documented:
                bad.append(f"{what}: fix key {k!r} is not in docs/json-schema.md")
    cat = next((g for g in gpus.values() if g["id"] == o["gpu"]), None)
    if cat and o["device_name"] != cat["device_name"]:
        bad.append(f"{what}: device_name {o['device_name']!r}, catalogue {cat['device_name']!r}")
    lines = [l for l in o["log"] if "KV cache size:" in l]
    if o["starts"] and o["engine"] == "V1":
        if len(lines) != 1:
            bad.append(f"{what}: {len(lines)} 'GPU KV cache size' lines")
            continue
        n = int(re.search(r"KV cache size: ([\d,]+) tokens", lines[0]).group(1).replace(",", ""))
        if n != o["kv_cache_tokens"]:
            bad.append(f"{what}: kv_cache_tokens {o['kv_cache_tokens']} but the log says {n}")
        logged += 1
    if o["starts"] and o["engine"] == "V0":
        if o["kv_cache_tokens"] != o["num_blocks"] * o["block_size"]:
            bad.append(f"{what}: V0 kv_cache_tokens {o['kv_cache_tokens']} != blocks x block_size")
if logged < 50:
    bad.append(f"only {logged} plans with a KV cache size line were checked")
# a model with sliding-window groups: the log's figure and the per-group one differ from 0.21
hybrid = [o for o in plans if o["num_kv_cache_groups"] > 1 and o["starts"] and o["engine"] == "V1"]
if not any(o["kv_cache_tokens"] != o["kv_cache_tokens_per_group"] for o in hybrid):
    bad.append("no hybrid model shows the log's figure apart from the per-group one")
old = [o for o in hybrid if o["vllm_version"] in ("0.9.2", "0.20.0")]
new = [o for o in hybrid if o["vllm_version"] in ("0.21.0", "0.33.0")]
if not new or all(o["kv_cache_tokens"] == o["kv_cache_tokens_per_group"] for o in new):
    bad.append("from 0.21 a hybrid model's log figure is max_concurrency x max_model_len")
if not old or any(o["kv_cache_tokens"] != o["kv_cache_tokens_per_group"] for o in old):
    bad.append("up to 0.20 the log's figure is num_blocks // groups x block_size")
t4 = [o for o in plans if o["gpu"] == "t4-16gb"]
if not t4 or t4[0]["device_name"] != "Tesla T4":
    bad.append(f"T4 device_name: {t4[0]['device_name'] if t4 else None!r}")

sim = json.load(open(f"{tmp}/sim.json"))
check_common(sim, "simulate")
serve_g = json.load(open(f"{tmp}/serve_gemma.json"))
if sim["plan_kv_cache_tokens"] != serve_g["kv_cache_tokens"]:
    bad.append(f"simulate plan_kv_cache_tokens {sim['plan_kv_cache_tokens']} != serve's {serve_g['kv_cache_tokens']}")
for f in ("sim_split", "serve_split"):
    o = json.load(open(f"{tmp}/{f}.json"))
    check_common(o, f)
    if not isinstance(o.get("disaggregated"), dict):
        bad.append(f"{f}: no disaggregated object")
        continue
    for k, v in o["disaggregated"].items():
        if k not in documented:
            bad.append(f"{f}: disaggregated key {k!r} is not in docs/json-schema.md")
        if k.endswith("_bytes") and not isinstance(v, int):
            bad.append(f"{f}: disaggregated {k} = {v!r} is not a whole number")
if sim["kv_cache_tokens"] != sim["num_blocks"] * sim["block_size"]:
    bad.append("simulate kv_cache_tokens is not the pool it ran")
for b in bad[:40]:
    print("FAIL:", b)
print(f"{len(plans)} serve objects, {logged} KV cache size lines checked")
sys.exit(1 if bad else 0)
EOF
exit $fail

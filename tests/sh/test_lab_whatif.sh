#!/usr/bin/env bash
# The lab API's what-if switches and lab.config(): kv-heads changes only the
# cache (bytes per token follow the KV heads, weights do not move), refuses
# a count that does not divide the attention heads with a clear message;
# request-rate is stored and read back; lab.config() is the real file.
set -uo pipefail
[ "${KVLAB_LESSONS:-1}" = "0" ] && exit 77
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/lessons/lib"
L="$dir/lessons"
cat > "$L/manifest.json" <<'JSON'
{"format_version": 1,
 "chapters": [{"number": 1, "title": "What if"}],
 "lessons": [
  {"number": 1, "chapter": 1, "file": "01-whatif.lua", "title": "kv-heads, request-rate, config"}
 ]}
JSON
cat > "$L/01-whatif.lua" <<'LUA'
return {
  id = 1,
  flags = { "kv-heads", "request-rate" },
  run = function(lab)
    local ok, err = lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb",
                               ["max-model-len"] = 8192 }
    assert(ok, err)
    local p8, w8 = lab.plan().kv_bytes_per_token, lab.plan().weights_gib
    local cfg, path = lab.config()
    assert(cfg.num_key_value_heads == 8 and cfg.num_hidden_layers == 32, "config fields")
    assert(cfg.head_dim == nil, "absent fields stay absent")
    assert(cfg.rope_scaling.rope_type == "llama3", "nested objects")
    assert(path:find("Llama%-3%.1%-8B%-Instruct/config%.json$"), path)
    ok, err = lab.restart{ ["kv-heads"] = 32 }
    assert(ok, err)
    assert(lab.plan().kv_bytes_per_token == 4 * p8, "32 KV heads: 4x the bytes")
    assert(lab.plan().weights_gib == w8, "weights unchanged")
    assert(lab.model().kv_heads == 32 and lab.flag("kv-heads") == "32")
    assert(lab.config().num_key_value_heads == 8, "config is still the real file")
    ok, err = lab.restart{ ["kv-heads"] = 5 }
    assert(not ok and not lab.running(), "kv-heads 5 must not start")
    print("kv-heads 5: " .. tostring(err))
    ok, err = pcall(lab.restart, { ["kv-heads"] = "two" })
    assert(not ok, "a bad value is an error")
    print("kv-heads two: " .. tostring(err))
    lab.restart{ ["kv-heads"] = "", ["request-rate"] = 2.5 }
    assert(lab.plan().kv_bytes_per_token == p8, "default restored")
    assert(lab.flag("request-rate") == "2.5", lab.flag("request-rate"))
    lab.ask{ prompt = "KV heads?", answer = lab.model().kv_heads, expect = "model.kv_heads", script = "8", wrong = { "32" } }
  end,
}
LUA
out=$("$KVLAB" check --lessons "$L" -v 1 2>&1); rc=$?
echo "$out"
fail=0
[ "$rc" -eq 0 ] || { echo "FAIL: exit $rc"; fail=1; }
grep -q "^PASS lesson 1 " <<<"$out" || { echo "FAIL: no PASS"; fail=1; }
grep -q "kv-heads 5: .*must divide the model's 32 attention heads" <<<"$out" || { echo "FAIL: kv-heads 5 message"; fail=1; }
grep -q "kv-heads two: .*takes a positive number" <<<"$out" || { echo "FAIL: kv-heads two message"; fail=1; }
exit $fail

#!/usr/bin/env bash
# kvlab serve MODEL FLAGS --vs OTHER-FLAGS: each side is the plan kvlab serve
# makes for that line alone (the flags after --vs change or add to the
# first's), the exit code is the second line's, bad input exits 2.
. "$(dirname "$0")/cli_lib.sh"
"$KVLAB" serve $L8 --gpu rtx-4090 --max-model-len 16384 --vs --kv-cache-dtype fp8 --max-num-seqs 64 --json >"$tmp/vs.json"; rc=$?
[ $rc = 0 ] || { echo "FAIL --vs exit $rc"; fail=1; }
"$KVLAB" serve $L8 --gpu rtx-4090 --max-model-len 16384 --json >"$tmp/a.json"
"$KVLAB" serve $L8 --gpu rtx-4090 --max-model-len 16384 --kv-cache-dtype fp8 --max-num-seqs 64 --json >"$tmp/b.json"
python3 - "$tmp" <<'PY' || fail=1
import json, sys
t = sys.argv[1]
vs, a, b = (json.load(open(t + "/" + f)) for f in ("vs.json", "a.json", "b.json"))
bad = 0
for side, want in (("a", a), ("b", b)):
    for k in ("kv_cache_tokens", "kv_cache_gib", "activation_gib", "weights_gib", "max_concurrency", "starts"):
        if vs[side][k] != want[k]:
            print("FAIL side %s: %s %r, serve alone %r" % (side, k, vs[side][k], want[k])); bad += 1
for d in vs["differences"]:
    ta = {x["name"]: x["gib"] for x in a["terms"]}; tb = {x["name"]: x["gib"] for x in b["terms"]}
    if abs(d["difference_gib"] - (tb[d["term"]] - ta[d["term"]])) > 2e-4:
        print("FAIL difference of %s" % d["term"]); bad += 1
if "--kv-cache-dtype auto -> fp8" not in vs["changes"] or "--max-num-seqs" not in vs["changes"]:
    print("FAIL changes: %r" % vs["changes"]); bad += 1
sys.exit(1 if bad else 0)
PY
# The second line would not start: exit 1, and the text says why.
out=$("$KVLAB" serve $L8 --gpu rtx-4090 --max-model-len 8192 --vs --max-model-len 131072); rc=$?
[ $rc = 1 ] || { echo "FAIL a second line that fails: exit $rc"; fail=1; }
grep -q "vLLM would .*starts *max_model_len" <<<"$out" || { echo "FAIL the verdicts row"; echo "$out" | tail -4; fail=1; }
for args in "--vs" "--gpu h100 --vs --max-model-len 8192" "$L8 --vs --nosuch 1" "$L8 --vs --model nosuch/model"; do
  "$KVLAB" serve $args >"$tmp/out" 2>"$tmp/err"; rc=$?
  if [ $rc != 2 ] || [ -s "$tmp/out" ] || [ "$(wc -l <"$tmp/err")" != 1 ]; then
    echo "FAIL (exit $rc) kvlab serve $args"; cat "$tmp/err"; fail=1
  fi
done
exit $fail

#!/usr/bin/env bash
# kvlab fit: the rows are kvlab serve's plans (same KV tokens), the verdicts
# and reasons hold for the issue's example, the cheapest row follows the
# stated rule, --sweep repeats the table per value, the whole catalogue at
# tp 1-8 answers in well under a second, and bad input exits 2 with one line.
. "$(dirname "$0")/cli_lib.sh"

"$KVLAB" fit $L8 --context 32768 --concurrency 16 --json >"$tmp/fit.json"; rc=$?
[ $rc = 0 ] || { echo "FAIL fit exit $rc"; fail=1; }
"$KVLAB" fit $L8 --context 32768 --concurrency 16 --sweep kv-cache-dtype=auto,fp8 --gpus h100,t4 --tp 1,2 --json >"$tmp/sweep.json"
"$KVLAB" serve $L8 --gpu h100-80gb-sxm --tensor-parallel-size 2 --max-model-len 32768 --json >"$tmp/serve.json"
"$KVLAB" fit $L8 --context 32768 --concurrency 16 >"$tmp/fit.txt"
python3 - "$tmp" <<'PY' || fail=1
import json, sys
t = sys.argv[1]
d = json.load(open(t + "/fit.json")); s = json.load(open(t + "/serve.json")); w = json.load(open(t + "/sweep.json"))
bad = 0
def row(rows, gpu, tp, **kw):
    for r in rows:
        if r["gpu"] == gpu and r["tensor_parallel_size"] == tp and all(r.get(k) == v for k, v in kw.items()):
            return r
    raise SystemExit("FAIL no row %s tp %d" % (gpu, tp))
def check(ok, what):
    global bad
    if not ok:
        print("FAIL", what); bad += 1
rows = d["rows"]
t4 = row(rows, "t4-16gb", 1)
check(not t4["fits"] and not t4["starts"] and t4["error_kind"] == "weights_oom" and "weights" in t4["limit"],
      "T4 at tp 1 does not fit, for its weights: %r" % t4)
h1 = row(rows, "h100-80gb-sxm", 1)
check(h1["starts"] and h1["max_concurrency"] < 16 and not h1["fits"],
      "H100 at tp 1 starts but holds fewer than 16 requests of 32,768: %r" % h1)
# Why: 16 x 32,768 tokens x 128 KiB a token (32 layers x 8 KV heads x 128 x
# K and V x 2 bytes) is 64 GiB of KV cache, more than the card has left.
check(abs(h1["kv_needed_gib"] - 16 * 32768 * 131072 / 2**30) < 1e-9 and h1["kv_needed_gib"] > h1["kv_cache_gib"]
      and "16 x 32,768 tokens need 64.00 GiB, %.2f left" % h1["kv_cache_gib"] in h1["limit"],
      "the H100 row says what 16 requests need and what is left: %r" % h1["limit"])
# What would fit: fp8 KV on the same card (the sweep's fp8 row), tp 2 (its
# row), the smallest bigger card at tp 1 (the cheapest row).
alts = {a["change"]: a for a in h1["fits_with"]}
hf8 = row(w["rows"], "h100-80gb-sxm", 1, **{"kv-cache-dtype": "fp8"})
check(set(alts) == {"--kv-cache-dtype fp8", "--tensor-parallel-size 2", "--gpu h100-nvl-94gb"},
      "the H100 row offers fp8 KV, tp 2 and the H100 NVL: %r" % h1["fits_with"])
for ch, want in (("--kv-cache-dtype fp8", hf8), ("--tensor-parallel-size 2", row(rows, "h100-80gb-sxm", 2)),
                 ("--gpu h100-nvl-94gb", d["cheapest"])):
    a = alts.get(ch, {})
    check(a.get("kv_cache_tokens") == want["kv_cache_tokens"] and a.get("max_concurrency") == want["max_concurrency"]
          and a["max_concurrency"] >= 16 and a.get("cards") == want["cards"], "%s is that row's plan: %r" % (ch, a))
check("; fits with --kv-cache-dtype fp8 (%.2f), tp 2 (%.2f), h100-nvl-94gb (%.2f)"
      % (hf8["max_concurrency"], alts["--tensor-parallel-size 2"]["max_concurrency"], d["cheapest"]["max_concurrency"])
      in h1["limit"], "the text names them: %r" % h1["limit"])
# The T4's weights do not fit one card: no fp8 KV offered, more cards are.
t4alts = [a["change"] for a in t4["fits_with"]]
check("--kv-cache-dtype fp8" not in t4alts and "--tensor-parallel-size 8" in t4alts, "the T4 offers: %r" % t4alts)
for r in rows:
    check(not (r["fits"] and r["fits_with"]), "a row that fits offers nothing: %r" % r)
h2 = row(rows, "h100-80gb-sxm", 2)
check(h2["fits"] and h2["kv_cache_tokens"] == s["kv_cache_tokens"],
      "H100 at tp 2 is kvlab serve's plan (%s tokens vs %s)" % (h2["kv_cache_tokens"], s["kv_cache_tokens"]))
check(abs(h2["max_concurrency"] - round(s["max_concurrency"], 2)) < 1e-9, "H100 tp 2 concurrency as serve's")
for r in rows:
    check(r["fits"] == (r["starts"] and r["max_concurrency"] >= 16), "fits is starts and >= 16 at once: %r" % r)
fit = [r for r in rows if r["fits"]]
gib = {}
import subprocess, os
cat = json.load(open(os.environ["KVLAB_SOURCE_DIR"] + "/assets/gpus.json"))
for g in (cat["gpus"] if isinstance(cat, dict) else cat):
    gib[g["id"]] = g["reported_total_gib"]
best = min(fit, key=lambda r: (r["cards"], gib[r["gpu"]], -r["kv_cache_tokens"]))
check(d["cheapest"]["gpu"] == best["gpu"] and d["cheapest"]["tensor_parallel_size"] == best["tensor_parallel_size"],
      "cheapest is %s tp %d, the rule gives %s tp %d" % (d["cheapest"]["gpu"], d["cheapest"]["tensor_parallel_size"],
                                                        best["gpu"], best["tensor_parallel_size"]))
check(len(w["rows"]) == 8 and w["sweep"] == "kv-cache-dtype", "the sweep has 2 values x 2 cards x 2 sizes")
hf = hf8
check(hf["fits"] and hf["kv_cache_tokens"] > h1["kv_cache_tokens"] * 1.9, "fp8 KV doubles the H100's pool and fits: %r" % hf)
check(w["cheapest"]["gpu"] == "h100-80gb-sxm" and w["cheapest"]["tensor_parallel_size"] == 1
      and w["cheapest"]["kv-cache-dtype"] == "fp8", "the sweep's cheapest is the H100 at tp 1 with fp8: %r" % w["cheapest"])
sys.exit(1 if bad else 0)
PY
grep -q "^t4-16gb .* no    weights: 14.99 GiB per card do not fit" "$tmp/fit.txt" || { echo "FAIL the text row of the T4"; fail=1; }
grep -q "cheapest = the fewest cards" "$tmp/fit.txt" || { echo "FAIL the text says how cheapest is chosen"; fail=1; }

# None fits: exit 1.
"$KVLAB" fit $L8 --context 32768 --concurrency 16 --gpus t4 --tp 1 >/dev/null; rc=$?
[ $rc = 1 ] || { echo "FAIL no row fits: exit $rc, want 1"; fail=1; }

# The whole catalogue at tp 1-8 in well under a second.
start=$(date +%s%N)
"$KVLAB" fit $L8 --context 32768 --concurrency 16 --tp 1,2,3,4,5,6,7,8 --json >"$tmp/all.json"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["rows"]))' "$tmp/all.json")
[ "$ms" -lt 1000 ] || { echo "FAIL the whole catalogue at tp 1-8 took $ms ms"; fail=1; }
[ "$n" -ge 160 ] || { echo "FAIL only $n rows for the whole catalogue at tp 1-8"; fail=1; }

bad() { # expected-substring args...
  local want=$1; shift
  "$KVLAB" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc != 2 ] || [ -s "$tmp/out" ] || [ "$(wc -l <"$tmp/err")" != 1 ] || ! grep -qF -- "$want" "$tmp/err"; then
    echo "FAIL (exit $rc) kvlab $*"; sed 's/^/  /' "$tmp/err" | head -3; fail=1
  fi
}
bad "no MODEL given" fit
bad "unknown model" fit nobody/nothing
bad "--tp takes sizes from 1 to 64, not '0'" fit $L8 --tp 0
bad "--gpus: unknown GPU 'nosuch'" fit $L8 --gpus nosuch
bad "--sweep takes FLAG=V1,V2" fit $L8 --sweep kv-cache-dtype
bad "--sweep: unknown flag --nosuch" fit $L8 --sweep nosuch=1,2
bad "--context takes a whole number" fit $L8 --context -5
bad "--gpu is what fit varies" fit $L8 --gpu h100
# an empty list is bad input, not "no row serves" (exit 1)
bad "--gpus names no card" fit $L8 --gpus ""
bad "--gpus names no card" fit $L8 --gpus ,
bad "--tp takes sizes from 1 to 64" fit $L8 --tp ,
bad "--sweep takes FLAG=V1,V2" fit $L8 --sweep kv-cache-dtype=,
exit $fail

#!/usr/bin/env bash
# The prefill/decode split (engine/kv_disagg.c, vLLM's NixlConnector with a
# proxy): `kvlab simulate --disaggregate P:D` finishes every request of the
# trace, moves each prompt's KV once (kv_transfer_bytes = the prompt's blocks
# x 128 KiB per token for Llama-3.1-8B), lets the decode instance load every
# prompt token it does not hold but the last (remote_prefill_tokens), merges
# the decode instances' latencies, charges the link named by
# --kv-transfer-link, and under prefill-heavy load gives a lower inter-token
# latency than one instance; `kvlab serve --disaggregate` sizes the transfer;
# bad splits and links exit 2.
. "$(dirname "$0")/cli_lib.sh"
cli_need_python
# field F of the top level (F) or of the split (d.F)
get() { jget "$1" "${2/#d./disaggregated.}"; }

GEN='gen:requests=120,rate=5,prompt=128,output=16,shared=1,prefix=2048,prefixes=16,seed=1'
SIM=("$K" simulate $M --gpu h100 --max-model-len 8192 --num-gpu-blocks-override 1024 --trace "$GEN")
for s in 1:1 1:2 2:1; do
  "${SIM[@]}" --disaggregate $s --json >"$tmp/$s.json" 2>"$tmp/err" || fail "--disaggregate $s: $(cat "$tmp/err")"
  n=$(get "$tmp/$s.json" requests_submitted)
  [ "$(get "$tmp/$s.json" d.requests_finished)" = "$n" ] || fail "$s: $(get "$tmp/$s.json" d.requests_finished) of $n finished"
  [ "$(get "$tmp/$s.json" d.kv_transfers)" = "$n" ] || fail "$s: not one transfer per request"
  p=$(get "$tmp/$s.json" d.prompt_tokens)
  [ "$p" = "$(get "$tmp/$s.json" prompt_tokens)" ] || fail "$s: the prefill instances computed $p prompt tokens, one instance $(get "$tmp/$s.json" prompt_tokens)"
  b=$(get "$tmp/$s.json" d.kv_transfer_bytes)
  # every prompt block crosses: prompt tokens rounded up to 16 per request, 131072 bytes each
  python3 -c "import sys; b,p,n=map(int,sys.argv[1:]); sys.exit(not (p*131072 <= b <= (p+15*n)*131072 and b % (16*131072) == 0))" "$b" "$p" "$n" \
    || fail "$s: kv_transfer_bytes $b is not the prompts' blocks ($p tokens, $n requests)"
  # the decode side loads what its own prefix cache lacks, all but each prompt's last token
  r=$(get "$tmp/$s.json" d.remote_prefill_tokens)
  [ "$r" -gt 0 ] && [ "$r" -le $((p - n)) ] || fail "$s: remote_prefill_tokens $r not in 1..$((p - n))"
  python3 -c "import sys; sys.exit(not (float(sys.argv[1]) > 0 and float(sys.argv[2]) > 0))" \
    "$(get "$tmp/$s.json" d.ttft_mean_s)" "$(get "$tmp/$s.json" d.itl_mean_s)" || fail "$s: no latencies merged"
done
# with no shared prefix the decode side holds nothing: it loads all but the last token of every prompt
"$K" simulate $M --gpu h100 --trace gen:requests=50,rate=4,prompt=1000,output=32,seed=3 --disaggregate 1:2 --json \
  >"$tmp/np.json" 2>"$tmp/err" || fail "no-prefix split: $(cat "$tmp/err")"
[ "$(get "$tmp/np.json" d.remote_prefill_tokens)" = $(( $(get "$tmp/np.json" d.prompt_tokens) - 50 )) ] \
  || fail "no prefix: remote_prefill_tokens $(get "$tmp/np.json" d.remote_prefill_tokens), prompt tokens $(get "$tmp/np.json" d.prompt_tokens)"

# prefill-heavy load: the split keeps decode steps free of prefills (lower ITL),
# a second prefill instance halves the queue for prefills (lower TTFT), and an
# H100's NVLink (450 GB/s each way) moves the KV 9x faster than a 400 Gb/s NIC
H='gen:requests=400,rate=8,prompt=4096,output=256,seed=2'
for c in "1:1 rdma" "2:1 rdma" "1:1 nvlink"; do
  set -- $c
  "$K" simulate $M --gpu h100 --trace "$H" --disaggregate $1 --kv-transfer-link $2 --json >"$tmp/h$1$2.json" 2>"$tmp/err" \
    || fail "heavy $c: $(cat "$tmp/err")"
done
python3 - "$tmp" <<'PY' || fail "heavy trace figures"
import json, sys
t = sys.argv[1]
a, b, c = (json.load(open(f"{t}/h{n}.json")) for n in ("1:1rdma", "2:1rdma", "1:1nvlink"))
bad = []
if not a["disaggregated"]["itl_mean_s"] < a["itl_mean_s"] / 2:
    bad.append(f"ITL split {a['disaggregated']['itl_mean_s']} vs one instance {a['itl_mean_s']}")
if not b["disaggregated"]["ttft_mean_s"] < a["disaggregated"]["ttft_mean_s"]:
    bad.append(f"TTFT 2:1 {b['disaggregated']['ttft_mean_s']} not below 1:1 {a['disaggregated']['ttft_mean_s']}")
r = a["disaggregated"]["kv_transfer_s"] / c["disaggregated"]["kv_transfer_s"]
d = a["disaggregated"]
if not (0 < d["prefill_peak_kv_usage"] <= 1 and 0 < d["decode_mean_kv_usage"] <= d["decode_peak_kv_usage"] <= 1):
    bad.append(f"pool usage of the split: {d['prefill_peak_kv_usage']}, {d['decode_mean_kv_usage']}, {d['decode_peak_kv_usage']}")
if abs(r - 9.0) > 1e-6:
    bad.append(f"rdma / nvlink link time {r}, not 9")
if a["disaggregated"]["kv_transfer_bytes"] != c["disaggregated"]["kv_transfer_bytes"]:
    bad.append("the link changed the bytes moved")
for x in bad:
    print("FAIL:", x)
sys.exit(1 if bad else 0)
PY

# NixlConnector's histograms (nixl/stats.py): one observation per transfer, their bytes summed
"${SIM[@]}" --disaggregate 1:1 --metrics >"$tmp/split.prom" 2>/dev/null || fail "--disaggregate --metrics"
pm() { awk -v n="$1{model_name=\"$M\"}" '$1 == n {print $2}' "$tmp/split.prom"; }
[ "$(pm vllm:nixl_bytes_transferred_count)" = 120 ] || fail "nixl_bytes_transferred_count $(pm vllm:nixl_bytes_transferred_count)"
[ "$(pm vllm:nixl_bytes_transferred_sum)" = "$(get "$tmp/1:1.json" d.kv_transfer_bytes)" ] || fail "nixl_bytes_transferred_sum"
[ "$(pm vllm:nixl_xfer_time_seconds_count)" = 120 ] || fail "nixl_xfer_time_seconds_count"

# serve: the split's GPUs and the KV a request moves
"$K" serve $M --gpu h100 --disaggregate 2:1 --json >"$tmp/serve.json" || fail "serve --disaggregate"
[ "$(get "$tmp/serve.json" d.gpus)" = 3 ] || fail "serve 2:1 is not 3 GPUs"
[ "$(get "$tmp/serve.json" d.kv_transfer_bytes_per_token)" = 131072 ] || fail "serve: not 128 KiB per token"
"$K" serve $M --gpu h100 --disaggregate 1:1 | grep -qF "128 KiB per token (2.00 MiB per 16-token block)" || fail "serve text"

# bad input
for bad in 0:1 1:0 1 1:x -1:1 17:1 ''; do
  out=$("${SIM[@]}" --disaggregate "$bad" 2>&1); rc=$?
  [ $rc = 2 ] && grep -qF -- "--disaggregate takes P:D" <<<"$out" || fail "--disaggregate '$bad' (exit $rc): $out"
done
out=$("${SIM[@]}" --disaggregate 1:1 --kv-transfer-link carrier-pigeon 2>&1); rc=$?
[ $rc = 2 ] && grep -qF "must be rdma, nvlink or pcie" <<<"$out" || fail "bad link (exit $rc): $out"
out=$("${SIM[@]}" --kv-transfer-link rdma 2>&1); rc=$?
[ $rc = 2 ] && grep -qF "needs --disaggregate" <<<"$out" || fail "link without a split (exit $rc): $out"
out=$("${SIM[@]}" --disaggregate 1:1 --verify 2>&1); rc=$?
[ $rc = 2 ] || fail "--disaggregate --verify (exit $rc): $out"
out=$("$K" serve $M --disaggregate 1:x 2>&1); rc=$?
[ $rc = 2 ] || fail "serve --disaggregate 1:x (exit $rc)"
echo "ok: 1:1 moved $(get "$tmp/1:1.json" d.kv_transfer_bytes) bytes; heavy ITL $(get "$tmp/h1:1rdma.json" itl_mean_s) -> $(get "$tmp/h1:1rdma.json" d.itl_mean_s) s"

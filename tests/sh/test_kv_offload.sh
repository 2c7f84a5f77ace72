#!/usr/bin/env bash
# The host KV tier (engine/kv_offload.c, vLLM's OffloadingConnector): on a
# shared-prefix trace whose prefixes outgrow a small GPU pool,
# --kv-offloading-size brings blocks back from CPU memory (external prefix
# cache hits, none without it) and more tokens are reused in all; a tier too
# small for the working set evicts and hits nothing; --kv-transfer-config
# naming OffloadingConnector runs the same tier; releases without the flag or
# the connector exit 2; LMCache is accepted with a "not modelled" note.
# 16 prefixes of 2,048 tokens (128 blocks each, 2,048 blocks in all) against a
# GPU pool of 1,024 blocks: the GPU prefix cache cannot hold them all
. "$(dirname "$0")/cli_lib.sh"
GEN='gen:requests=120,rate=5,prompt=128,output=16,shared=1,prefix=2048,prefixes=16,seed=1'
SIM=("$K" simulate $M --gpu h100 --max-model-len 8192 --num-gpu-blocks-override 1024 --trace "$GEN")

"${SIM[@]}" --json >"$tmp/off.json" 2>"$tmp/err" || fail "simulate without a tier: $(cat "$tmp/err")"
"${SIM[@]}" --kv-offloading-size 64 --json >"$tmp/on.json" 2>"$tmp/err" || fail "simulate --kv-offloading-size 64: $(cat "$tmp/err")"
for f in external_prefix_cache_queries external_prefix_cache_hits reused_tokens prefix_cache_hits; do
  [ -n "$(num $f "$tmp/off.json")" ] || fail "--json lacks $f"
done
[ "$(num external_prefix_cache_hits "$tmp/off.json")" = 0 ] || fail "external hits without a tier"
[ "$(num external_prefix_cache_queries "$tmp/off.json")" = 0 ] || fail "external queries without a tier"
eh=$(num external_prefix_cache_hits "$tmp/on.json")
eq=$(num external_prefix_cache_queries "$tmp/on.json")
[ "${eh:-0}" -gt 0 ] || fail "no external prefix cache hits with --kv-offloading-size 64"
[ "$eq" -ge "$eh" ] || fail "external hits $eh above queries $eq"
r0=$(num reused_tokens "$tmp/off.json"); r1=$(num reused_tokens "$tmp/on.json")
[ "$r1" -gt "$r0" ] || fail "reused tokens $r1 with the tier, not above $r0 without"
# every loaded block is a block of hit tokens (block_size 16), and loads cost host-link time
lb=$(num offload_loaded_blocks "$tmp/on.json")
[ "$((lb * 16))" = "$eh" ] || fail "loaded blocks $lb x 16 != external hits $eh"
awk -v s="$(num offload_load_s "$tmp/on.json")" 'BEGIN { exit !(s > 0) }' || fail "no load time charged"
# loaded blocks hold their K/V: read back every step (--verify), the run is the same run
"${SIM[@]}" --kv-offloading-size 64 --verify --json >"$tmp/ver.json" 2>"$tmp/err" \
  || fail "simulate --kv-offloading-size 64 --verify: $(cat "$tmp/err")"
[ "$(num external_prefix_cache_hits "$tmp/ver.json")" = "$eh" ] || fail "--verify changed the external hits"
# 64 GiB of 2 MiB blocks (32 layers x 8 KV heads x 128 x 2 x bf16 x 16 tokens)
[ "$(num offload_capacity_blocks "$tmp/on.json")" = 32768 ] || fail "64 GiB is not 32768 blocks"
[ "$(num offload_evicted_blocks "$tmp/on.json")" = 0 ] || fail "a 64 GiB tier evicted"

# Prometheus, vLLM's names: the connector prefix-cache counters always (0 without a tier), the
# OffloadingConnector's transfer counters only with one (0.33 offloading/metrics.py)
"${SIM[@]}" --metrics >"$tmp/off.prom" 2>/dev/null || fail "--metrics without a tier"
"${SIM[@]}" --metrics --kv-offloading-size 64 >"$tmp/on.prom" 2>/dev/null || fail "--metrics with a tier"
pm() { awk -v n="$1{model_name=\"$M\"}" '$1 == n {print $2}' "$2"; }
[ "$(pm 'vllm:external_prefix_cache_hits_total' "$tmp/off.prom")" = 0 ] || fail "no zero external hits counter without a tier"
grep -q '^vllm:kv_offload_' "$tmp/off.prom" && fail "offload metrics without a tier"
[ "$(pm 'vllm:external_prefix_cache_hits_total' "$tmp/on.prom")" = "$eh" ] || fail "vllm:external_prefix_cache_hits_total is not $eh"
[ "$(pm 'vllm:external_prefix_cache_queries_total' "$tmp/on.prom")" = "$eq" ] || fail "vllm:external_prefix_cache_queries_total is not $eq"
[ "$(pm 'vllm:kv_offload_load_bytes_total' "$tmp/on.prom")" = $((lb * 2097152)) ] || fail "load bytes are not $lb blocks of 2 MiB"
sb=$(num offload_stored_blocks "$tmp/on.json")
[ "$(pm 'vllm:kv_offload_store_bytes_total' "$tmp/on.prom")" = $((sb * 2097152)) ] || fail "store bytes are not $sb blocks of 2 MiB"
grep -q '^vllm:kv_offload_load_time_total{' "$tmp/on.prom" || fail "no vllm:kv_offload_load_time_total"

# a tier of 256 blocks (0.5 GiB) is smaller than one round of the prefixes: LRU evicts each before reuse
"${SIM[@]}" --kv-offloading-size 0.5 --json >"$tmp/small.json" 2>"$tmp/err" || fail "0.5 GiB: $(cat "$tmp/err")"
[ "$(num offload_capacity_blocks "$tmp/small.json")" = 256 ] || fail "0.5 GiB is not 256 blocks"
[ "$(num offload_evicted_blocks "$tmp/small.json")" -gt 0 ] || fail "a 0.5 GiB tier never evicted"
[ "$(num external_prefix_cache_hits "$tmp/small.json")" = 0 ] || fail "hits from a tier that thrashes"

# the connector by name: 8 GiB of cpu_bytes_to_use (0.14 and later) = 4096 blocks
"${SIM[@]}" --json --kv-transfer-config \
  '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":8589934592}}' \
  >"$tmp/conn.json" 2>"$tmp/err" || fail "OffloadingConnector: $(cat "$tmp/err")"
[ "$(num offload_capacity_blocks "$tmp/conn.json")" = 4096 ] || fail "cpu_bytes_to_use 8 GiB is not 4096 blocks"
[ "$(num external_prefix_cache_hits "$tmp/conn.json")" -gt 0 ] || fail "no hits through OffloadingConnector"
# before 0.14 the connector reads num_cpu_blocks
"${SIM[@]}" --json --vllm-version 0.12 --kv-transfer-config \
  '{"kv_connector":"OffloadingConnector","kv_connector_extra_config":{"num_cpu_blocks":1000}}' \
  >"$tmp/old.json" 2>"$tmp/err" || fail "0.12 OffloadingConnector: $(cat "$tmp/err")"
[ "$(num offload_capacity_blocks "$tmp/old.json")" = 1000 ] || fail "0.12: num_cpu_blocks 1000 not read"
# the release table's row decides the key (kv_release_memory.offload_cpu_bytes): 0.13.0 is the
# last to read num_cpu_blocks, 0.14.0 the first to read cpu_bytes_to_use
BOTH='{"kv_connector":"OffloadingConnector","kv_connector_extra_config":{"num_cpu_blocks":1000,"cpu_bytes_to_use":8589934592}}'
for v in 0.13.0:1000 0.14.0:4096 0.17.0:4096; do
  "${SIM[@]}" --json --vllm-version ${v%%:*} --kv-transfer-config "$BOTH" >"$tmp/both.json" 2>"$tmp/err" \
    || fail "${v%%:*} OffloadingConnector: $(cat "$tmp/err")"
  [ "$(num offload_capacity_blocks "$tmp/both.json")" = ${v##*:} ] || fail "${v%%:*}: tier of $(num offload_capacity_blocks "$tmp/both.json") blocks, not ${v##*:}"
done

# releases without them: vLLM would reject the flag / the connector
out=$("${SIM[@]}" --kv-offloading-size 8 --vllm-version 0.11.0 2>&1); rc=$?
[ $rc = 2 ] && grep -qF -- "unrecognized arguments: --kv-offloading-size (vLLM 0.11.0 has no such flag" <<<"$out" || fail "0.11.0 flag (exit $rc): $out"
out=$("${SIM[@]}" --kv-transfer-config '{"kv_connector":"OffloadingConnector"}' --vllm-version 0.10.2 2>&1); rc=$?
[ $rc = 2 ] && grep -qF "vLLM 0.10.2 has no OffloadingConnector" <<<"$out" || fail "0.10.2 connector (exit $rc): $out"
out=$("${SIM[@]}" --kv-transfer-config 'not json' 2>&1); rc=$?
[ $rc = 2 ] && grep -qF "takes JSON with a kv_connector" <<<"$out" || fail "bad JSON (exit $rc): $out"
out=$("${SIM[@]}" --kv-offloading-size lots 2>&1); rc=$?
[ $rc = 2 ] || fail "--kv-offloading-size lots: exit $rc"

# LMCache: accepted, not modelled, no tier
"${SIM[@]}" --json --kv-offloading-size 8 --kv-offloading-backend lmcache >"$tmp/lm.json" 2>"$tmp/err" \
  || fail "lmcache backend: $(cat "$tmp/err")"
grep -qF "kv-offloading-backend lmcache is accepted but not modelled" "$tmp/lm.json" || fail "no LMCache note"
[ "$(num external_prefix_cache_hits "$tmp/lm.json")" = 0 ] || fail "an LMCache run hit a tier"
out=$("${SIM[@]}" --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' 2>&1); rc=$?
[ $rc = 0 ] && grep -qF "NixlConnector is accepted but not modelled" <<<"$out" || fail "Nixl note (exit $rc): $out"
echo "ok: external hits $eh of $eq queried tokens; reused $r0 -> $r1 tokens"

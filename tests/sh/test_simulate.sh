#!/usr/bin/env bash
# kvlab simulate end to end: the --json contract, preemptions on a 4090 that
# fp8 KV reduces, Prometheus output, and bad input (clear message, exit 2/1).
. "$(dirname "$0")/cli_lib.sh"

GEN='gen:requests=300,rate=5,prompt=2000,output=800,shared=0.3,prefix=1024,seed=3'
"$K" simulate $M --gpu rtx-4090 --max-model-len 8192 --accounting textbook --trace "$GEN" --json >"$tmp/bf16.json" 2>"$tmp/err" \
  || fail "simulate bf16: $(cat "$tmp/err")"
for f in requests_finished prompt_tokens generation_tokens preemptions peak_kv_usage mean_kv_usage \
         prefix_cache_queries prefix_cache_hits prefix_cache_hit_rate mean_num_requests_waiting duration_s \
         throughput_tokens_per_s ttft_mean_s ttft_p99_s itl_mean_s e2e_latency_mean_s; do
  v=$(num "$f" "$tmp/bf16.json")
  [ -n "$v" ] || fail "--json lacks $f"
done
p16=$(num preemptions "$tmp/bf16.json")
[ "$p16" -gt 0 ] || fail "expected preemptions on a 4090 at max-model-len 8192, got $p16"
"$K" simulate $M --gpu rtx-4090 --max-model-len 8192 --kv-cache-dtype fp8 --accounting textbook --trace "$GEN" --json >"$tmp/fp8.json" \
  || fail "simulate fp8"
p8=$(num preemptions "$tmp/fp8.json")
[ "$p8" -lt "$p16" ] || fail "fp8 KV should preempt less: bf16 $p16, fp8 $p8"
b16=$(num num_blocks "$tmp/bf16.json"); b8=$(num num_blocks "$tmp/fp8.json")
[ "$b8" -gt "$b16" ] || fail "fp8 pool ($b8 blocks) not larger than bf16 ($b16)"
peak=$(num peak_kv_usage "$tmp/bf16.json")
awk -v p="$peak" 'BEGIN { exit !(p > 0.9 && p <= 1.0) }' || fail "peak_kv_usage $peak"

# text summary and Prometheus metrics
"$K" simulate $M --gpu h100-80gb --max-model-len 8192 --trace gen:requests=50,rate=20,seed=1 --metrics >"$tmp/out" \
  || fail "simulate --metrics"
grep -q "requests finished     50 of 50" "$tmp/out" || fail "text summary: $(head -5 "$tmp/out")"
grep -q '^vllm:num_preemptions_total{model_name=' "$tmp/out" || fail "no vllm:num_preemptions_total"
grep -q '^vllm:kv_cache_usage_perc{' "$tmp/out" || fail "no vllm:kv_cache_usage_perc"
grep -q '^vllm:time_to_first_token_seconds_bucket{le="+Inf"' "$tmp/out" || fail "no TTFT histogram"

# --json --metrics is ONE JSON object: the Prometheus text is its "prometheus"
# string, the notes (here the card assumed without --gpu) its "notes" list
"$K" simulate $M --max-model-len 8192 --trace gen:requests=20,rate=20,seed=1 --json --metrics \
  >"$tmp/jm.json" 2>"$tmp/err" || fail "simulate --json --metrics: $(cat "$tmp/err")"
python3 - "$tmp/jm.json" <<'PY' || fail "--json --metrics is not one JSON object with prometheus + notes: $(head -c 300 "$tmp/jm.json")"
import json, sys
o = json.loads(open(sys.argv[1]).read())  # raises on text after the object
assert o["requests_finished"] == 20
assert "\nvllm:num_preemptions_total{model_name=" in o["prometheus"], "no Prometheus counters inside"
assert o["notes"] == ["no --gpu given; assuming h100-80gb"], o["notes"]
PY
[ ! -s "$tmp/err" ] || fail "--json wrote notes to stderr too: $(cat "$tmp/err")"
# the text mode says the assumed card on stderr, as serve does; not with --gpu
"$K" simulate $M --max-model-len 8192 --trace gen:requests=5,seed=1 >/dev/null 2>"$tmp/err" || fail "simulate no --gpu"
grep -qx "kvlab simulate: note: no --gpu given; assuming h100-80gb" "$tmp/err" || fail "no assumed-card note: $(cat "$tmp/err")"
"$K" simulate $M --gpu h100-80gb --max-model-len 8192 --trace gen:requests=5,seed=1 >/dev/null 2>"$tmp/err" || fail "simulate --gpu"
! grep -q "assuming" "$tmp/err" || fail "assumed-card note with --gpu given: $(cat "$tmp/err")"
"$K" simulate $M --gpu h100-80gb --max-model-len 8192 --trace gen:requests=5,seed=1 --json >"$tmp/g.json" || fail "simulate --gpu --json"
python3 -c 'import json,sys; n=json.load(open(sys.argv[1]))["notes"]; assert n == [], n' "$tmp/g.json" || fail "notes with --gpu: $(grep -A3 notes "$tmp/g.json")"

# README's simulate paragraph quotes the two example lines' figures: they are
# what the engine prints now (one a second, bf16 vs fp8 KV, default accounting,
# a warm compile cache as the lines say)
README=${KVLAB_SOURCE_DIR:?}/README.md
R1='gen:requests=300,rate=1,prompt=2000,output=800,shared=0.3,prefix=1024,seed=3'
for d in auto fp8; do
  "$K" simulate $M --gpu rtx-4090 --max-model-len 8192 --compile-cache warm --kv-cache-dtype $d --trace "$R1" --json >"$tmp/r_$d.json" \
    || fail "README example ($d)"
done
pa=$(num preemptions "$tmp/r_auto.json"); pf=$(num preemptions "$tmp/r_fp8.json")
ta=$(printf '%.0f' "$(num ttft_p50_s "$tmp/r_auto.json")"); tf=$(printf '%.2f' "$(num ttft_p50_s "$tmp/r_fp8.json")")
readme=$(tr '\n' ' ' <"$README" | tr -s ' ')
for want in "preempts $pa times" "(TTFT p50 $ta s)" "preempts $pf times" "(TTFT p50 $tf s"; do
  case "$readme" in *"$want"*) ;; *) fail "README.md's simulate paragraph should say '$want' (bf16 $pa preemptions, p50 $ta s; fp8 $pf, p50 $tf s)";; esac
done
[ "$pf" -lt "$pa" ] && awk -v f="$tf" 'BEGIN { exit !(f < 1) }' || fail "README example: fp8 should preempt less ($pf vs $pa) and start half within 1 s ($tf)"

# a JSONL trace file, with --verify (device read-back every step)
cat >"$tmp/t.jsonl" <<'J'
{"arrival_s": 0.0, "prompt_tokens": 300, "output_tokens": 20, "prefix_id": "repo", "prefix_tokens": 512}
{"arrival_s": 0.01, "prompt_tokens": 200, "output_tokens": 20, "prefix_id": "repo", "prefix_tokens": 512}
{"arrival_s": 0.02, "prompt_token_ids": [5, 6, 7, 8], "output_tokens": 3, "priority": 1, "cache_salt": "u1"}
J
"$K" simulate $M --gpu h100-80gb --max-model-len 4096 --trace "$tmp/t.jsonl" --json --verify >"$tmp/f.json" \
  || fail "simulate trace file"
[ "$(num requests_finished "$tmp/f.json")" = 3 ] || fail "trace file: $(cat "$tmp/f.json")"
[ "$(num prefix_cache_hits "$tmp/f.json")" -ge 512 ] || fail "shared prefix not hit"

# no MODEL, or one kvlab cannot load: exit 2, one line, before the trace is read
"$K" simulate --trace gen:n=2 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "no MODEL given" "$tmp/err" || fail "no model: exit $rc $(cat "$tmp/err")"
"$K" simulate nosuch/model >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "unknown model 'nosuch/model'" "$tmp/err" || fail "unknown model: exit $rc $(cat "$tmp/err")"
# bad input: exit 2 with the line and the field
printf '{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 1}\n{"arrival_s": 1, "prompt_tokens": 5}\n' >"$tmp/bad.jsonl"
"$K" simulate $M --trace "$tmp/bad.jsonl" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] || fail "bad trace: exit $rc"
grep -q "line 2: field 'output_tokens'" "$tmp/err" || fail "bad trace message: $(cat "$tmp/err")"
"$K" simulate $M >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--trace" "$tmp/err" || fail "missing --trace: exit $rc $(cat "$tmp/err")"
# past the virtual clock's range, or two objects on a line: exit 2, one line
printf '{"arrival_s": 1e308, "prompt_tokens": 5, "output_tokens": 1}\n' >"$tmp/far.jsonl"
"$K" simulate $M --trace "$tmp/far.jsonl" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "line 1: field 'arrival_s': at most 1e+09 s" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -eq 1 ] \
  || fail "arrival 1e308: exit $rc $(cat "$tmp/err")"
printf '{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 1} {"x": 1}\n' >"$tmp/two.jsonl"
"$K" simulate $M --trace "$tmp/two.jsonl" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "line 1: text after the JSON object" "$tmp/err" || fail "two objects on a line: exit $rc $(cat "$tmp/err")"
"$K" simulate $M --trace gen:bogus=1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown key 'bogus'" "$tmp/err" || fail "bad gen spec: exit $rc $(cat "$tmp/err")"
# the server would not start (vLLM's error, exit 1)
"$K" simulate $M --gpu rtx-4090 --trace gen:requests=5 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "To serve at least one request" "$tmp/err" || fail "no-start: exit $rc $(cat "$tmp/err")"
# a pool too small for any request: a clear error, exit 1, no crash
"$K" simulate $M --gpu h100-80gb --max-model-len 8192 --num-gpu-blocks-override 8 \
  --trace gen:requests=5,prompt=4000,prompt_sigma=0 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "usable blocks" "$tmp/err" || fail "tiny pool: exit $rc $(cat "$tmp/err")"
# prompts longer than max_model_len are rejected with vLLM's message, the rest run
"$K" simulate $M --gpu h100-80gb --max-model-len 1024 --trace gen:requests=40,prompt=800,seed=2 >"$tmp/out" 2>&1 \
  || fail "long prompts: $(cat "$tmp/out")"
grep -q "is longer than the maximum model length of 1024" "$tmp/out" || fail "no vLLM length message: $(cat "$tmp/out")"
# a model with sliding-window layers runs (as full attention, said once)
"$K" simulate google/gemma-2-9b-it --gpu h100-80gb --max-model-len 4096 --trace gen:requests=20,rate=20 \
  >"$tmp/out" 2>"$tmp/err" || fail "gemma-2: $(cat "$tmp/err")"
grep -q "sliding-window layers as full attention" "$tmp/err" || fail "no sliding-window note: $(cat "$tmp/err")"
grep -q "requests finished     20 of 20" "$tmp/out" || fail "gemma-2 summary: $(cat "$tmp/out")"
# engine limits: refused with the limit (exit 2), never cut to fit an int32
"$K" simulate $M --gpu h100-80gb --max-model-len 8192 --activation-gib 1 --max-num-batched-tokens 4294967304 \
  --trace gen:requests=5 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "max-num-batched-tokens 4,294,967,304 is more than the engine holds (at most 1,073,741,824" "$tmp/err" \
  || fail "--max-num-batched-tokens 4294967304: exit $rc $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "limit message is not one line: $(cat "$tmp/err")"
"$K" simulate $M --gpu h100-80gb --max-model-len 8192 --activation-gib 1 --max-num-seqs 4294967304 --max-num-batched-tokens 8589934592 \
  --trace gen:requests=5 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "max-num-seqs 4,294,967,304 is more than the engine holds (at most 1,048,576" "$tmp/err" \
  || fail "--max-num-seqs 4294967304: exit $rc $(cat "$tmp/err")"
# a pool the card cannot hold: the plan refuses it as vLLM's allocation of
# the KV cache would fail (exit 1), before the engine or the host allocates
# anything (the engine's own limits: test_engine)
for n in 3000000000 100000000; do
  ( ulimit -v 3000000; timeout 20 "$K" simulate $M --gpu h100-80gb --max-model-len 8192 \
      --num-gpu-blocks-override $n --trace gen:requests=5 ) >/dev/null 2>"$tmp/err"; rc=$?
  if ! grep -q "AddressSanitizer" "$tmp/err"; then # ASan cannot start under an address-space limit
    [ $rc -eq 1 ] && grep -q "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" "$tmp/err" \
      || fail "$n blocks on an H100: exit $rc $(cat "$tmp/err")"
  fi
done
# a pool a (made-up, 1 PiB) card holds but whose block records exceed the
# host's memory: refused before allocating (run only on a machine with less
# than 30 GiB free, where the refusal is certain)
if [ "$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)" -lt 30 ]; then
  "$K" simulate $M --gpu h100-80gb --gpu-memory-gib 1000000 --max-model-len 8192 --num-gpu-blocks-override 400000000 \
    --trace gen:requests=5 >/dev/null 2>"$tmp/err"; rc=$?
  [ $rc -eq 2 ] && grep -q "more than the .* GiB available here" "$tmp/err" || fail "host memory refusal: exit $rc $(cat "$tmp/err")"
fi
# a trace that is not a regular file: refused at once, one line, exit 2
timeout 10 "$K" simulate $M --trace /dev/zero >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "/dev/zero: is a device, not a regular file" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -eq 1 ] \
  || fail "--trace /dev/zero: exit $rc $(cat "$tmp/err")"
mkfifo "$tmp/fifo"
timeout 10 "$K" simulate $M --trace "$tmp/fifo" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "is a pipe (FIFO), not a regular file" "$tmp/err" && [ "$(wc -l <"$tmp/err")" -eq 1 ] \
  || fail "--trace FIFO: exit $rc $(cat "$tmp/err")"
# --scheduling-policy: priority runs the high-priority request first (it arrives
# second; one sequence at a time), FCFS the other way round
cat >"$tmp/prio.jsonl" <<'J'
{"arrival_s": 0.0, "prompt_tokens": 64, "output_tokens": 200, "priority": 5}
{"arrival_s": 0.0, "prompt_tokens": 64, "output_tokens": 4, "priority": 0}
J
for pol in fcfs priority; do
  "$K" simulate $M --gpu h100-80gb --max-model-len 4096 --max-num-seqs 1 --scheduling-policy $pol \
    --trace "$tmp/prio.jsonl" --json >"$tmp/$pol.json" 2>"$tmp/err" || fail "--scheduling-policy $pol: $(cat "$tmp/err")"
done
tf=$(num ttft_mean_s "$tmp/fcfs.json"); tp=$(num ttft_mean_s "$tmp/priority.json")
awk -v f="$tf" -v p="$tp" 'BEGIN { exit !(p * 5 < f) }' || fail "priority did not run first: ttft fcfs $tf, priority $tp"
"$K" simulate $M --scheduling-policy lottery --trace gen:requests=2 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "fcfs or priority" "$tmp/err" || fail "bad policy: exit $rc $(cat "$tmp/err")"
# rules by release: full-prompt admission (vLLM 0.19+) preempts less on a tight pool
# than first-chunk admission (0.18, or 0.33 with --no-scheduler-reserve-full-isl)
TIGHT='gen:requests=200,rate=100,prompt=900,output=200,max_prompt=1500,seed=5'
for v in 0.18.0 0.33.0; do
  "$K" simulate $M --vllm-version $v --gpu h100-80gb --max-model-len 2048 --max-num-batched-tokens 512 \
    --num-gpu-blocks-override 200 --trace "$TIGHT" --json >"$tmp/r$v.json" 2>"$tmp/err" || fail "vllm $v: $(cat "$tmp/err")"
done
"$K" simulate $M --gpu h100-80gb --max-model-len 2048 --max-num-batched-tokens 512 --num-gpu-blocks-override 200 \
  --no-scheduler-reserve-full-isl --trace "$TIGHT" --json >"$tmp/rno.json" 2>"$tmp/err" || fail "no-reserve: $(cat "$tmp/err")"
p18=$(num preemptions "$tmp/r0.18.0.json"); p33=$(num preemptions "$tmp/r0.33.0.json"); pno=$(num preemptions "$tmp/rno.json")
[ "$p33" -lt "$p18" ] || fail "0.33 should preempt less than 0.18 on a tight pool: $p33 vs $p18"
[ "$pno" -gt "$p33" ] || fail "--no-scheduler-reserve-full-isl should preempt more than 0.33's default: $pno vs $p33"
"$K" simulate $M --vllm-version 0.20 --watermark 0.1 --trace gen:requests=2 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unrecognized arguments: --watermark (vLLM 0.20 has no such flag; 0.24.0-0.33.0 have it)" "$tmp/err" || fail "--watermark on 0.20: exit $rc $(cat "$tmp/err")"

# --steps-out: one config line, one line per request (with its token ids) and
# one per step; the steps add up to the summary
"$K" simulate $M --gpu h100-80gb --max-model-len 2048 --num-gpu-blocks-override 90 --json \
  --trace gen:requests=30,rate=50,prompt=300,output=40,shared=0.5,prefix=64,max_prompt=900,seed=4 --steps-out "$tmp/steps.jsonl" \
  >"$tmp/s.json" 2>"$tmp/err" || fail "--steps-out: $(cat "$tmp/err")"
[ "$(grep -c '"type":"config"' "$tmp/steps.jsonl")" -eq 1 ] || fail "--steps-out: no config line"
[ "$(grep -c '"type":"request"' "$tmp/steps.jsonl")" -eq 30 ] || fail "--steps-out: not 30 request lines"
[ "$(grep -c '"type":"step"' "$tmp/steps.jsonl")" -eq "$(num steps "$tmp/s.json")" ] || fail "--steps-out: step count"
python3 - "$tmp/steps.jsonl" "$(num preemptions "$tmp/s.json")" <<'PY' || fail "--steps-out content"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
reqs = {r["id"]: r for r in rows if r["type"] == "request"}
steps = [r for r in rows if r["type"] == "step"]
assert sum(len(s["preempted"]) for s in steps) == int(sys.argv[2]), "preemptions do not add up"
fin = [i for s in steps for i in s["finished"]]
assert sorted(fin) == sorted(reqs), "every request finishes once"
for r in reqs.values():
    assert len(r["output_token_ids"]) == r["max_tokens"], "output ids cover max_tokens"
    assert all(0 <= t < 128256 for t in r["prompt_token_ids"]), "token ids in the vocabulary"
PY
echo "ok"

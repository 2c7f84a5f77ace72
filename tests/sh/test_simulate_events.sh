#!/usr/bin/env bash
# kvlab simulate --events FILE: the event stream as JSON lines
# (docs/events.md): every line parses, seq numbers run 1, 2, 3 without a
# gap, the block events balance (every allocated or hit block is freed by
# the end), the request events agree with the summary, and a bad path is
# bad input (exit 2).
. "$(dirname "$0")/cli_lib.sh"
cli_need_python

GEN='gen:requests=60,rate=20,prompt=512,output=64,shared=0.3,prefix=1024,prefixes=2,seed=1'
"$K" simulate $M --num-gpu-blocks-override 300 --trace "$GEN" --json --events "$tmp/ev.jsonl" >"$tmp/sum.json" \
  2>"$tmp/err" || fail "simulate --events: $(cat "$tmp/err")"
[ -s "$tmp/ev.jsonl" ] || fail "no events written"
python3 - "$tmp/ev.jsonl" "$tmp/sum.json" <<'PY' || fail "event stream check failed"
import json, sys, collections
evs = [json.loads(l) for l in open(sys.argv[1])]
s = json.load(open(sys.argv[2]))
assert all(e["type"] != "gap" for e in evs), "a gap"
assert [e["seq"] for e in evs] == list(range(1, len(evs) + 1)), "seq not 1..n"
steps = [e["step"] for e in evs]
assert steps == sorted(steps), "steps go back"
c = collections.Counter(e["type"] for e in evs)
assert c["admit"] == s["requests_submitted"] - s["requests_rejected"], (c["admit"], s)
assert c["finish"] == s["requests_finished"], (c["finish"], s["requests_finished"])
assert c["preempt"] == s["preemptions"] and c["preempt"] > 0, (c["preempt"], s["preemptions"])
assert c["preempt"] == c["resume"], "every preempted request resumed"
assert c["evict"] == s["block_evictions"] and c["evict"] > 0, (c["evict"], s["block_evictions"])
assert c["alloc"] == s["block_allocations"], (c["alloc"], s["block_allocations"])
# references balance: each alloc (1) and hit (+1) is dropped by one free
refs = collections.Counter()
for e in evs:
    if e["type"] in ("alloc", "cache_hit"): refs[e["block"]] += 1
    if e["type"] == "free":
        refs[e["block"]] -= 1
        assert refs[e["block"]] == e["value"], ("ref count after free", e)
assert all(v == 0 for v in refs.values()), "blocks still held at the end"
logs = [e for e in evs if e["type"] == "log"]
assert logs and logs[0]["text"].startswith("block pool: 300 blocks"), logs[:1]
assert all("value" not in e for e in logs) and all("block" in e for e in evs if e["type"] == "alloc")
PY
# the summary is the same with and without --events
"$K" simulate $M --num-gpu-blocks-override 300 --trace "$GEN" --json >"$tmp/plain.json" || fail "simulate"
grep -v '"trace"' "$tmp/sum.json" >"$tmp/a"; grep -v '"trace"' "$tmp/plain.json" >"$tmp/b"
cmp -s "$tmp/a" "$tmp/b" || fail "--events changed the summary: $(diff "$tmp/a" "$tmp/b" | head -5)"
# a path that cannot be written: bad input
"$K" simulate $M --trace "$GEN" --events "$tmp/no/such/dir/ev.jsonl" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] || fail "unwritable --events path: exit $rc, want 2"
grep -q "events" "$tmp/err" || fail "message does not name --events: $(cat "$tmp/err")"
"$K" simulate $M --trace "$GEN" --events >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "--events without a value: want exit 2"
echo "ok: simulate --events"

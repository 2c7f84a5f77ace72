#!/usr/bin/env bash
# Hostile lessons (tests/lessons/hostile) under kvlab check: each ends with a
# message that names the limit it hit and its file:line, and kvlab never
# crashes or hangs. Lessons that must hit a limit that does not depend on the
# machine's speed (instructions, memory) run with the wall time out of the way
# (--seconds 600), so a busy machine cannot make the 3 s wall time the one
# hit; those ended by a refusal must end within 2 s (times KVLAB_TIME_SCALE,
# default 3, for a loaded or sanitizer build). The lessons: a heap bomb of live tables, an endless loop inside
# pcall (in a loop), a __gc finalizer that loops, traffic at math.huge and
# 1e300 requests/s, a backtracking pattern, lab.random over the whole
# integer range, coroutines too short for a hook, a heap bomb inside pcall,
# table.move over 1e15 slots, a swallowed __gc refusal, an xpcall handler
# that loops, strings at the length cap compared, copied and joined, lab.plot
# and lab.step_time's error paths, lab.split's token counts past int32, and
# string order (byte order under en_US.UTF-8 too).
set -uo pipefail
[ "${KVLAB_LESSONS:-1}" = "0" ] && exit 77
H="$KVLAB_SOURCE_DIR/tests/lessons/hostile"
# The worst case for string order: en_US.UTF-8 (strcoll there takes about a
# second per 64 MB). Built into this test's own folder when glibc's sources
# are installed (localedef, no root), else C.UTF-8. kvlab check takes the
# locale from the environment as the app does and sorts strings as C.
LOC=$(mktemp -d)
trap 'rm -rf "$LOC"' EXIT
if command -v localedef >/dev/null && localedef -i en_US -f UTF-8 "$LOC/en_US.UTF-8" >/dev/null 2>&1; then
  export LOCPATH="$LOC"; export LC_ALL=en_US.UTF-8
else
  export LC_ALL=C.UTF-8
fi
echo "locale: $LC_ALL"
scale=${KVLAB_TIME_SCALE:-3}
fail=0
slow=0 # 1: the lesson runs to a work or memory limit (no time bound, the wall time out of the way)
expect() { # expect N rc pattern
  local n=$1 want=$2 pat=$3 out rc t0 t1 ms extra=()
  [ "$slow" = 1 ] && extra=(--seconds 600)
  t0=$(date +%s%N)
  out=$(timeout $((60 * scale)) "$KVLAB" check --lessons "$H" "${extra[@]}" "$n" 2>&1); rc=$?
  t1=$(date +%s%N)
  ms=$(( (t1 - t0) / 1000000 ))
  echo "--- hostile $n (exit $rc, ${ms} ms)"; echo "$out" | head -4
  if [ "$rc" -ne "$want" ]; then echo "FAIL: hostile $n exit $rc, wanted $want"; fail=1; fi
  if ! grep -qE -- "$pat" <<<"$out"; then echo "FAIL: hostile $n output lacks /$pat/"; fail=1; fi
  if [ "$slow" = 0 ] && [ "$ms" -gt $((2000 * scale)) ]; then echo "FAIL: hostile $n took ${ms} ms"; fail=1; fi
}
slow=1 expect 1 1 "ERROR hostile/01-heap-bomb.lua:3: the lesson used all of its 256 MiB of Lua memory"
slow=1 expect 2 1 "ERROR hostile/02-pcall-loop.lua:3: the lesson ran too long without waiting .*200 million Lua instructions"
expect 3 1 "ERROR hostile/03-gc-loop.lua:2: setmetatable: lessons cannot use __gc finalizers"
expect 4 1 "ERROR hostile/04-traffic-huge.lua:3: lab.traffic: rate must be > 0 and at most 1000000"
expect 5 1 "ERROR hostile/05-traffic-1e300.lua:3: lab.traffic: rate must be > 0 and at most 1000000"
expect 6 1 "ERROR hostile/06-pattern.lua:4: string.find: this pattern could take up to .* matching steps"
expect 7 1 "ERROR hostile/07-random-range.lua:15: random: every draw in range"
slow=1 expect 8 1 "ERROR hostile/08-coroutine-dodge.lua:3: the lesson ran too long without waiting"
slow=1 expect 9 1 "ERROR hostile/09-pcall-memory.lua:3: the lesson used all of its 256 MiB of Lua memory"
slow=1 expect 10 1 "ERROR hostile/10-table-move.lua:2: the lesson ran too long without waiting"
expect 11 0 "PASS lesson 11 "
slow=1 expect 12 1 "ERROR hostile/12-xpcall-handler.lua:2: the lesson ran too long without waiting"
CAP="a string longer than 1 MiB"
slow=1 expect 13 1 "ERROR hostile/13-strcoll.lua:6: $CAP"
# the longest strings compared forever under the default wall time: the
# watchdog stops it at 3 s whatever one comparison costs: the lesson ends
# under 5 s. What kvlab check costs around a lesson (start-up, loading, the
# summary) is measured beside it on lesson 19 (an error at once) and taken
# off, so a loaded machine slowing the process down does not count as the
# lesson running long.
t0=$(date +%s%N)
"$KVLAB" check --lessons "$H" 19 >/dev/null 2>&1
base=$(( ($(date +%s%N) - t0) / 1000000 ))
t0=$(date +%s%N)
expect 14 1 "ERROR hostile/14-compare-loop.lua:7: the lesson ran too long without waiting .*more than 3 s"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "hostile 14: ${ms} ms, of which kvlab check's own start and end about ${base} ms"
[ $((ms - base)) -lt 5000 ] || { echo "FAIL: hostile 14 ran $((ms - base)) ms (the wall time is 3 s)"; fail=1; }
slow=1 expect 15 1 "ERROR hostile/15-concat-loop.lua:4: the lesson ran too long without waiting .*200 million Lua instructions"
slow=1 expect 16 1 "ERROR hostile/16-table-concat.lua:5: $CAP"
slow=1 expect 17 1 "ERROR hostile/17-format-rep.lua:4: $CAP"
expect 18 1 "ERROR hostile/18-plot-leak.lua:5: no ylabel"
expect 19 1 "ERROR hostile/19-step-time-overflow.lua:4: lab.step_time: chunk 1: start \\+ n must be at most 2\\^40 tokens"
expect 20 1 "ERROR hostile/20-split-wrap.lua:5: 'prompt_tokens' = 4294967396 is out of range"
# under en_US.UTF-8 (when built above) "a" < "B" by the locale; lessons see bytes
expect 21 0 "PASS lesson 21 "
# All of them in one run: one lesson's limit never leaks into the next.
out=$(timeout $((120 * scale)) "$KVLAB" check --lessons "$H" 2>&1); rc=$? # the wall time bounds each
echo "$out" | tail -1
grep -q "kvlab check: 2 passed, 19 failed" <<<"$out" || { echo "FAIL: the whole set: $(tail -1 <<<"$out")"; fail=1; }
exit $fail

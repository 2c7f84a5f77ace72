#!/usr/bin/env bash
# kvlab serve --allocate --hold S: a value that is not a number of seconds
# gets one line and exit 2; any number, however large (1e308, inf), holds
# by sleeping (no CPU spent) and SIGTERM or SIGINT end the hold at once,
# releasing the memory. Runs on the host backend (KVLAB_DEVICE=host, as
# ctest sets it): the hold is the same code on a GPU.
set -u
: "${KVLAB:?set KVLAB to the kvlab binary}"
: "${KVLAB_SOURCE_DIR:?set KVLAB_SOURCE_DIR}"
export KVLAB_DATA_DIR="$KVLAB_SOURCE_DIR"
export KVLAB_DEVICE=${KVLAB_DEVICE:-host}
fail=0
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
L8=meta-llama/Llama-3.1-8B-Instruct
SERVE=(serve "$L8" --gpu h100-80gb --max-model-len 8192 --allocate)

for v in nan NaN -1 -inf abc 5s 0x10 ""; do
  timeout 10 "$KVLAB" "${SERVE[@]}" --hold "$v" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ $rc != 2 ] || [ -s "$tmp/out" ] || [ "$(wc -l <"$tmp/err")" != 1 ] ||
     ! grep -qF -- "--hold needs a number of seconds" "$tmp/err"; then
    echo "FAIL --hold '$v': exit $rc"; sed 's/^/  /' "$tmp/err" | head -3; fail=1
  fi
done
timeout 10 "$KVLAB" "${SERVE[@]}" --hold=nan >/dev/null 2>"$tmp/err"
[ $? = 2 ] || { echo "FAIL --hold=nan: not refused"; fail=1; }

# CPU ticks (user + system) of a process, from /proc.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null; }

for v in 1e308 inf 86400; do
  for sig in TERM INT; do
    "$KVLAB" "${SERVE[@]}" --hold "$v" >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    held=""
    for _ in $(seq 1 100); do # up to 10 s to allocate and start holding
      grep -q "holding the memory" "$tmp/err" 2>/dev/null && { held=1; break; }
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if [ -z "$held" ]; then
      echo "FAIL --hold $v: never started holding"; sed 's/^/  /' "$tmp/err" | head -5; fail=1
      kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=""; continue
    fi
    # the least CPU of three 1 s windows: on a loaded machine (ASan, other jobs)
    # the work before the message can still be finishing in the first window
    t0=""; t1=""
    for _ in 1 2 3; do
      a=$(ticks "$pid"); sleep 1; b=$(ticks "$pid")
      if [ -n "$a" ] && [ -n "$b" ] && { [ -z "$t0" ] || [ $((b - a)) -lt $((t1 - t0)) ]; }; then t0=$a; t1=$b; fi
    done
    if [ -z "$t0" ] || [ -z "$t1" ] || [ $((t1 - t0)) -gt 10 ]; then # > 0.1 s of CPU in 1 s of holding
      echo "FAIL --hold $v: spent $((t1 - t0)) CPU ticks in 1 s of holding"; fail=1
    fi
    kill -"$sig" "$pid"
    done_=""
    for _ in $(seq 1 30); do
      kill -0 "$pid" 2>/dev/null || { done_=1; break; }
      sleep 0.1
    done
    if [ -z "$done_" ]; then
      echo "FAIL --hold $v: still holding 3 s after SIG$sig"; fail=1; kill -9 "$pid" 2>/dev/null
    elif ! grep -q "releasing the memory" "$tmp/err"; then
      echo "FAIL --hold $v: SIG$sig ended it without saying so"; sed 's/^/  /' "$tmp/err" | tail -3; fail=1
    fi
    wait "$pid" 2>/dev/null
    pid=""
  done
done

# a short hold ends by itself, and --hold 0 not at all
timeout 10 "$KVLAB" "${SERVE[@]}" --hold 0.3 >"$tmp/out" 2>"$tmp/err" || { echo "FAIL --hold 0.3: exit $?"; fail=1; }
grep -q "On the host backend" "$tmp/out" || { echo "FAIL: --allocate on the host backend says nothing"; fail=1; }
timeout 10 "$KVLAB" "${SERVE[@]}" --hold 0 >/dev/null 2>"$tmp/err" || { echo "FAIL --hold 0: exit $?"; fail=1; }
grep -q "holding" "$tmp/err" && { echo "FAIL --hold 0 held"; fail=1; }

[ $fail = 0 ] && echo "PASS serve --hold: bad values refused, huge holds sleep, signals release"
exit $fail

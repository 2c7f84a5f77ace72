#!/usr/bin/env bash
# No tmux test leaves a kvlab process behind to take a CPU from the tests
# after it (tests/sh/tui_lib.sh): when its tmux ends, the app leaves on its
# own (its terminal is gone: end of input), the pane's shell waits for it
# instead of hanging up its process group, and one that is stuck anyway
# (here: stopped) is killed by tui_stop.
. "$(dirname "$0")/tui_lib.sh"
TUI_TIMEOUT_SCALE=1   # the reaper's grace: 5 s

gone() { ! kill -0 "$1" 2>/dev/null || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]; }

# 1. The terminal goes away: the app leaves on its own, before the reaper would act.
tui_start 80 24 --
tui_wait "Lesson 1/" 10
pid=$(tui_app_pid) || fail "cannot find the kvlab process"
t0=$(date +%s%N)
tui_tmux kill-server >/dev/null 2>&1 || true
for i in $(seq 100); do gone "$pid" && break; sleep 0.1; done
gone "$pid" || fail "kvlab ($pid) still runs 10 s after its terminal went away"
echo "left on its own in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
tui_stop

# 2. A stuck app (stopped: it cannot leave) is gone after tui_stop.
tui_start 80 24 --
tui_wait "Lesson 1/" 10
pid=$(tui_app_pid) || fail "cannot find the kvlab process"
kill -STOP "$pid"
tui_stop 2>/dev/null
# SIGKILLed: an ASan build's huge mappings take a while to tear down on a busy machine
for i in $(seq 300); do gone "$pid" && break; sleep 0.1; done
gone "$pid" || { kill -KILL "$pid" 2>/dev/null || true; fail "a stuck kvlab ($pid) outlived tui_stop by 30 s"; }
[ -z "$(tui_own_pids)" ] || fail "kvlab processes left: $(tui_own_pids)"
echo "PASS"

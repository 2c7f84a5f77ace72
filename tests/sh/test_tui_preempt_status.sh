#!/usr/bin/env bash
# Lesson 16 at 80x24: the page "Watch it happen" restarts the server right
# after the goal's fast run, which preempted. The app's status row tells a
# preemption as it happens (tui/app/app_feed.c); the old server's message
# must not outlive that server (tui/app/app_main.c server_changed), or the
# restarted run reads as preempting seconds before its views show one. So
# on every screen of the slow run, "Preempted request #N" shows only with
# the views agreeing: vllm:num_preemptions_total above 0 and request N
# waiting.
. "$(dirname "$0")/tui_lib.sh"
export KVLAB_LESSONS_DIR="$KVLAB_SOURCE_DIR/lessons"
fail() { echo "FAIL: $*" >&2; tui_screen >&2 || true; exit 1; }

tui_l16_answers
tui_start 80 24 -- --lesson 16
tui_wait "Lesson 16/" 10
tui_l16_to_slow_run
seen=0 told=0
end=$((SECONDS + 120 * ${TUI_TIMEOUT_SCALE:-3} / 3))
while [ $SECONDS -le $end ]; do
    s=$(tui_screen)
    n=$(grep -oE "num_preemptions_total +[0-9]+" <<<"$s" | grep -oE "[0-9]+$" | head -1 || true)
    said=$(grep -oE "Preempted request #[0-9]+" <<<"$s" | grep -oE "[0-9]+$" | head -1 || true)
    if [ -n "$said" ]; then
        told=1
        [ "${n:-0}" -gt 0 ] || { echo "$s" >&2; fail "the status tells request $said preempted while the metrics show ${n:-no} preemption"; }
    fi
    [ "${n:-0}" -gt 0 ] && seen=1
    grep -q "Missed it? Press {" <<<"$s" && break
    sleep 0.1
done
[ $seen = 1 ] || fail "the slow run showed no preemption"
[ $told = 1 ] || echo "note: the status of the preemption was not caught on screen (it lasts 6 s)"
echo "PASS"

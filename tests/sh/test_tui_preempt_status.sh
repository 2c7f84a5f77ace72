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

out=$("$KVLAB" check 16 --lessons "$KVLAB_LESSONS_DIR" --accounting textbook)
answer=$(sed -nE "s/^    accepted '([^']*)'.*/\1/p" <<<"$out" | head -1)
predicted=$(sed -nE "s/^    predicted '([^']*)'.*/\1/p" <<<"$out" | head -1)
[ -n "$answer" ] && [ -n "$predicted" ] || fail "kvlab check 16 gave no accepted answer or prediction"
tui_start 80 24 -- --lesson 16
tui_wait "Lesson 16/" 10
tui_advance_until "type your prediction" 12
tui_keys -l -- "$predicted"; tui_keys Enter
tui_wait "You predicted" 60 || fail "the prediction was not taken"
tui_advance_until ", Enter to" 12
tui_keys -l -- "$answer"; tui_keys Enter
tui_advance_until "Goal:" 12
tui_set_flag max-num-seqs 16
tui_wait "Watch it happen" 60 || fail "the lesson did not restart for the slow run"
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

#!/usr/bin/env bash
# A restart inside one step reaches the followers (#26): on lesson 16 the
# presenter meets the goal ("Make the scheduler preempt") while the server
# runs, and the lesson restarts the server inside that step and runs it
# slowly to the first preemption ("Missed it? Press {"). A follower (80x24,
# following since the lesson's first page) must show that run, with the
# presenter's figures (running, waiting, preemptions, usage, used blocks),
# not the run before the restart nor a fresh engine that never ran; and a
# follower that joins only then starts from the presenter's engine image
# with the presenter's figures.
. "$(dirname "$0")/tui_lib.sh"

export KVLAB_LESSONS_DIR="$KVLAB_SOURCE_DIR/lessons"
TUI_ROOMS=$(mktemp -d /tmp/kvlab-roomrs.XXXXXX)
chmod 0700 "$TUI_ROOMS"
TUI_ROOMS_RUN="$TUI_TMP/run"
mkdir -m 0700 "$TUI_ROOMS_RUN"
room_cleanup() { tui_cleanup; rm -rf "$TUI_ROOMS"; }
TUI_FIGURE_NAMES='kv_cache_usage_perc|num_requests_running|num_requests_waiting|num_preemptions_total'
trap room_cleanup EXIT

tui_l16_answers
tui_room_start pres 80 24 KVLAB_LESSONS_DIR="$KVLAB_LESSONS_DIR" -- --present l16 --lesson 16
tui_on pres tui_wait "presenting to 0" 10 || fail "the presenter did not open its room"
tui_room_start f1 80 24 KVLAB_LESSONS_DIR="$KVLAB_LESSONS_DIR" -- --follow l16
tui_on pres tui_wait "presenting to 1" 10 || fail "the follower did not join"
tui_on f1 tui_wait "Lesson 16/" 10 || fail "the follower does not show lesson 16"

# The presenter walks to the slow run after the restart.
TUI_SESSION=pres tui_l16_to_preemption
tui_on f1 tui_wait "Missed it? Press {" 60 || fail "the follower did not reach the slow run's page"
tui_same_figures pres f1
# A late joiner: the presenter's engine image, the same figures.
tui_room_start f2 80 24 KVLAB_LESSONS_DIR="$KVLAB_LESSONS_DIR" -- --follow l16
# (its text view opens at the page's top: the page's first words after the restart)
tui_on f2 tui_wait "Watch it happen" 60 || fail "the late follower did not reach the slow run's page"
# (its screen may show fewer metrics rows: the pool's flashes and the
# preempted request's table are the animation's, which it did not watch;
# every figure it shows is the presenter's)
end=$((SECONDS + 10 * ${TUI_TIMEOUT_SCALE:-3}))
while :; do
    late=$(tui_figures f2)
    want=$(tui_figures pres)
    missing=0
    IFS=';' read -ra items <<<"$late"
    for it in "${items[@]}"; do [[ ";$want" == *";$it;"* ]] || missing=1; done
    [[ "$late" == *kv_cache_usage_perc* && "$late" == *used* && $missing = 0 ]] && break
    [ $SECONDS -le $end ] || fail "the late follower shows '$late', the presenter '$want'"
    sleep 0.2
done
echo PASS

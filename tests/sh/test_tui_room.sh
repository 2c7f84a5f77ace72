#!/usr/bin/env bash
# Classroom mode: a presenter (80x24) and two followers (80x24, and 160x48
# with NO_COLOR and --ascii), each its own tmux session on this test's tmux
# server. n, an engine run and a flag change on the presenter show up on both
# followers with the same lesson, step and figures; keys typed in a follower
# do not move the presenter; a follower breaks away and rejoins; q on the
# presenter asks first while followers are attached; a presenter back after
# kill -9 with a shorter run is shown at once; the presenter's typed
# answer, a wrong answer's verdict, a hint, a flag value being typed and a
# rewind show on the followers; a killed
# presenter leaves its followers running with a message, and they re-attach
# when it comes back; a follower of another uid (65534, via setpriv, when run
# as root) is let in only with the room's group, else told why.
. "$(dirname "$0")/tui_lib.sh"
LESSONS="$(cd "$(dirname "$0")" && pwd)/tui_lessons_room"

# Rooms live in folders of this test only (KVLAB_ROOMS_DIR is /tmp's stand-in;
# another uid must be able to reach it, so not under the private $TUI_TMP).
ROOMS=$(mktemp -d /tmp/kvlab-roomtest.XXXXXX)
chmod 1777 "$ROOMS"
XDG_RUN="$TUI_TMP/run"
mkdir -m 0700 "$XDG_RUN"
STUDENT_STATE=$(mktemp -d /tmp/kvlab-roomtest-state.XXXXXX)
chmod 0777 "$STUDENT_STATE"
room_cleanup() { tui_cleanup; rm -rf "$ROOMS" "$STUDENT_STATE"; }
trap room_cleanup EXIT

# room_start SESSION COLS ROWS [ENV=VAL ...] -- [kvlab args...]: the app's
# default release (its fixture quotes no textbook figure), this test's
# lessons, $ROOM_PREFIX before the command.
TUI_ROOMS=$ROOMS
TUI_ROOMS_RUN=$XDG_RUN
room_start() {
    local s=$1 cols=$2 rows=$3
    shift 3
    TUI_ACCOUNTING='' TUI_ROOM_PREFIX="${ROOM_PREFIX:-}" tui_room_start "$s" "$cols" "$rows" KVLAB_LESSONS_DIR="$LESSONS" "$@"
}
on() { tui_on "$@"; }
screen_of() { TUI_SESSION=$1 tui_screen; }

step_of() { screen_of "$1" | head -1 | grep -oE 'step [0-9]+' | head -1; }
# Wait until every follower shows the presenter's figures (they converge on
# the presenter's engine tick).
same_figures() { tui_same_figures pres "$@"; }

room_start pres 80 24 -- --present class --lesson 1
on pres tui_wait "presenting to 0" 10
room_start f1 80 24 -- --follow class
room_start f2 160 48 NO_COLOR=1 -- --follow class --ascii
on pres tui_wait "presenting to 2" 10
for f in f1 f2; do
    on $f tui_wait "following" 10
    on $f tui_wait "Lesson 1/1" 5
    on $f tui_wait "Start" 5
    on $f tui_wait "A pool of 300 blocks" 5
done
on f2 tui_wait "> held by the lesson" 5   # the ASCII play glyph: --ascii holds for a follower
# kvlab rooms lists it: presenter, lesson, followers, and that we may join.
rooms=$(KVLAB_ROOMS_DIR="$ROOMS" XDG_RUNTIME_DIR="$XDG_RUN" "$KVLAB" rooms)
echo "$rooms" | grep -qE "^$(id -un)/class +$(id -un) +1 Fixture: a class follows the pool +2 +yes" ||
    fail "kvlab rooms does not list the room: $rooms"
s=$(screen_of f2)
if printf '%s' "$s" | grep -q '[┌│▶]'; then fail "the --ascii follower draws box glyphs"; fi

# n and an engine run: both followers animate the same run and land on the
# same page, step and figures.
on pres tui_keys n
tui_wait_each "First run" 10 f1 f2
tui_wait_each "First run over" 20 pres f1 f2
same_figures f1 f2
tui_shown_by_all 'run1 step=[0-9]+ done=[0-9]+ preempted=[0-9]+' pres f1 f2 >/dev/null
[ "$(step_of f1)" = "$(step_of pres)" ] && [ "$(step_of f2)" = "$(step_of pres)" ] || fail "steps differ"

# Keys typed in a follower do not move the presenter.
p_before=$(step_of pres)
on f1 tui_keys n n b f space
on f1 tui_wait "The presenter leads" 5
sleep 0.5
[ "$(step_of pres)" = "$p_before" ] || fail "a follower's keys moved the presenter"
on pres tui_wait "First run over" 2

# A flag change on the presenter: the followers' servers restart with it.
on pres tui_keys f
on pres tui_wait "Esc: done" 5
on pres tui_keys Enter C-u 8 Enter
on pres tui_wait "max-num-seqs = 8" 5
on pres tui_keys Escape
tui_wait_each "set --max-num-seqs 8" 10 f1 f2
for f in f1 f2; do
    screen_of $f | grep -qE 'max-num-seqs +8( |│|\||$)' || fail "$f's flags view does not show max-num-seqs 8"
done
# A second run under the new flag.
on pres tui_keys n
tui_wait_each "Second run over" 20 pres f1 f2
same_figures f1 f2
tui_shown_by_all 'run2 step=[0-9]+ done=[0-9]+ preempted=[0-9]+' pres f1 f2 >/dev/null

# A follower breaks away (its own lesson from the presenter's page on) and rejoins.
on f1 tui_keys x
on f1 tui_wait "on your own" 5
on f1 tui_keys n
on f1 tui_wait "How many tokens does one block hold" 10
on pres tui_wait "Second run over" 2
screen_of pres | grep -q "How many tokens" && fail "the follower's n moved the presenter"
[ -f "$TUI_STATE/kvlab/rooms/class/progress.json" ] || fail "a follower on its own keeps no progress of its own"
on f1 tui_keys Escape x
on f1 tui_wait "following" 5
on f1 tui_wait "Second run over" 10
same_figures f1 f2

# The presenter's progress file is the presenter's: same user, same state
# folder, yet the followers never wrote it.
grep -qE '"step":[[:space:]]*2,' "$TUI_STATE/kvlab/progress.json" || fail "the presenter's progress is not at step 2: $(cat "$TUI_STATE/kvlab/progress.json")"

# A restart inside one step (the fixture starts a smaller server on the
# question's page and runs it): the followers show that run at once, with
# the presenter's figures, not the earlier server's.
on pres tui_keys n
tui_wait_each "Restarted run over" 30 pres f1 f2
same_figures f1 f2
tui_shown_by_all 'run3 step=[0-9]+ done=[0-9]+ preempted=[0-9]+' pres f1 f2 >/dev/null

# The presenter's screen beyond the lesson reaches the followers: what it
# types in the answer box, a wrong answer's verdict, and a rewind (one
# engine step back, then End), each shown as the presenter's.
on pres tui_keys -l -- "zebra"
tui_wait_each "> zebra" 10 f1 f2
on pres tui_keys Enter
on pres tui_wait "could not read a number" 5
tui_wait_each "could not read a number" 10 f1 f2
on pres tui_keys '['
on pres tui_wait "replay, step" 5
tui_wait_each "replay, step" 10 f1 f2
same_figures f1 f2
on pres tui_keys End
on pres tui_wait_gone "replay, step" 5
for f in f1 f2; do on $f tui_wait_gone "replay, step" 10 || fail "$f stays in the replay after the presenter's End"; done

# A hint the presenter asks for, and a flag value it is typing but has not
# applied, show on the followers as the presenter's; leaving the edit with
# Esc changes nothing.
on pres tui_keys C-u h
on pres tui_wait "Hint: The flags view lists" 5 || fail "the presenter got no hint"
tui_wait_each "Hint: The flags view lists" 10 f1 f2
on pres tui_keys f
on pres tui_wait "Esc: done" 5
seqs_row() { screen_of pres | grep -oE 'max-num-seqs +[0-9]+' | head -1 | tr -s ' '; }
was=$(seqs_row)
[ -n "$was" ] || fail "the presenter's flags view shows no max-num-seqs"
on pres tui_keys Enter C-u 1 2
typing_shown() { # SESSION: its flags view shows max-num-seqs 12 being typed
    local end=$((SECONDS + 10 * ${TUI_TIMEOUT_SCALE:-3}))
    until screen_of "$1" | grep -qE 'max-num-seqs +12( |│|\||_|$)'; do
        [ $SECONDS -le $end ] || { screen_of "$1" >&2; fail "$1 does not show the presenter typing max-num-seqs 12"; }
        sleep 0.2
    done
}
for s in pres f1 f2; do typing_shown $s; done
on pres tui_keys Escape   # leaves the edit: the flag's own value again
end=$((SECONDS + 5 * ${TUI_TIMEOUT_SCALE:-3}))
until [ "$(seqs_row)" = "$was" ]; do
    [ $SECONDS -le $end ] || fail "Esc did not leave the edit: '$(seqs_row)', was '$was'"
    sleep 0.2
done
on pres tui_keys Escape   # closes the flags view
on pres tui_wait_gone "Esc: done" 5 || fail "the flags view did not close"
screen_of pres | grep -q "max-num-seqs = 12" && fail "Esc applied the value being typed"

# q with followers attached asks first; n keeps the class going.
on pres tui_keys q
on pres tui_wait "2 followers see the room close" 5
on pres tui_keys n
on pres tui_wait "presenting to 2" 5   # the question closed: n was taken
screen_of pres | grep -q "EXIT:" && fail "one q ended the class with followers attached"

# The presenter quits: followers stay, say so, and re-attach when it is back.
pid=$(TUI_SESSION=pres tui_app_pid) || fail "no presenter process"
kill -TERM "$pid"
on pres tui_wait "EXIT:" 10
for f in f1 f2; do
    on $f tui_wait "presenter quit" 10
    on $f tui_wait "presenter left" 5
    on $f tui_wait "Restarted run over" 2   # the page stays
    on $f tui_wait "The presenter has left" 5   # and says so, not "the presenter moves on"
    if screen_of $f | grep -qF "the presenter moves on"; then fail "$f still says the presenter moves on"; fi
done
tui_tmux kill-session -t pres
room_start pres 80 24 -- --present class
on pres tui_wait "presenting to 2" 15
on pres tui_wait "Restarted run over" 10
tui_wait_each "following" 10 f1 f2
same_figures f1 f2
# Killed outright (no goodbye): the followers notice the socket closing.
pid=$(TUI_SESSION=pres tui_app_pid) || fail "no presenter process"
kill -KILL "$pid"
tui_wait_each "presenter gone" 10 f1 f2
tui_tmux kill-session -t pres

# The presenter comes back after kill -9 with a shorter run than the one
# the followers saw: they rebuild at once (a new presenter run), not wait
# for the new run to pass the old one's engine step.
room_start pres 80 24 -- --present class
on pres tui_wait "presenting to 2" 15
on pres tui_wait "How many tokens" 10
on pres tui_keys 1 6 Enter
on pres tui_wait "The engine keeps running" 10
on pres tui_keys + + + + + + + + + + + +
sleep 4   # a long run at x64 (thousands of engine steps)
tui_wait_each "The engine keeps running" 10 f1 f2
pid=$(TUI_SESSION=pres tui_app_pid) || fail "no presenter process"
kill -KILL "$pid"
tui_wait_each "presenter gone" 10 f1 f2
tui_tmux kill-session -t pres
room_start pres 80 24 -- --present class
on pres tui_wait "presenting to 2" 15
on pres tui_wait "The engine keeps running" 10
on pres tui_keys space   # hold the new run still: followers must show it, not the old one
tui_wait_each "following" 10 f1 f2
same_figures f1 f2
pid=$(TUI_SESSION=pres tui_app_pid) || fail "no presenter process"
kill -KILL "$pid"
tui_wait_each "presenter gone" 10 f1 f2
tui_tmux kill-session -t pres

# Another uid. As root: uid 65534 through setpriv, with and without the group.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1 && getent group users >/dev/null 2>&1; then
    gid=$(getent group users | cut -d: -f3)
    room_start pres 80 24 -- --present class --allow-group users
    on pres tui_wait "presenting to 2" 15   # f1 and f2 find it again (root may join)
    ROOM_PREFIX="setpriv --reuid=65534 --regid=65534 --clear-groups" \
        room_start stranger 80 24 "XDG_STATE_HOME=$STUDENT_STATE" -- --follow root/class
    on stranger tui_wait "refused" 10
    on stranger tui_wait "not open to you" 5
    ROOM_PREFIX="setpriv --reuid=65534 --regid=65534 --groups=$gid" \
        room_start member 80 24 "XDG_STATE_HOME=$STUDENT_STATE" -- --follow root/class
    on member tui_wait "following" 10
    on member tui_wait "The engine keeps running" 10
    on pres tui_wait "presenting to 3" 5
    [ -z "$(ls -A "$STUDENT_STATE")" ] || fail "a follower wrote progress: $(ls -R "$STUDENT_STATE")"
else
    echo "second uid part skipped (needs root, setpriv and a 'users' group); test_room_net covers the peer check"
fi

on f2 tui_quit_clean
on f1 tui_quit_clean
echo "PASS"

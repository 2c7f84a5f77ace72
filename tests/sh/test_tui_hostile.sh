#!/usr/bin/env bash
# Hostile lessons in the app (tests/lessons/hostile): a heap bomb and an
# endless loop inside pcall end with a message naming the limit (3 s of wall time at most; the waits allow for the app starting on a busy machine)
# (waits scale with TUI_TIMEOUT_SCALE), the app stays responsive, and it
# still quits on q with the terminal restored; a lesson that tried a __gc
# finalizer can be left (switching lessons, resetting, quitting) without a
# hang; SIGTERM during a running loop ends the app at once, terminal restored.
. "$(dirname "$0")/tui_lib.sh"
H="$KVLAB_SOURCE_DIR/tests/lessons/hostile"

tui_start 80 24 -- --lessons "$H" --lesson 1
# the heap cap, or on a machine too busy to fill 256 MiB in 3 s the wall time
# (kvlab check's test holds the memory message itself)
tui_wait "The lesson stopped with an error" 10 || fail "heap bomb: no message"
tui_screen | grep -qE "256 MiB of Lua|ran too long without" || fail "heap bomb: the message names no limit"
tui_wait "r: start the lesson again" 2
tui_quit_clean || fail "heap bomb: q did not quit cleanly"
tui_stop

tui_start 80 24 -- --lessons "$H" --lesson 2
tui_wait "ran too long without" 10 || fail "pcall'd loop: no message"
tui_wait "02-pcall-loop.lua:3:" 5
tui_keys '?'
tui_wait "Block pool" 5 || fail "pcall'd loop: the app does not answer keys"
tui_keys Escape
tui_quit_clean || fail "pcall'd loop: q did not quit cleanly"
tui_stop

# __gc: refused, so switching away, resetting and quitting cannot hang.
tui_start 80 24 -- --lessons "$H" --lesson 11
tui_wait "setmetatable with __gc: false" 5 || fail "__gc: the refusal is not shown"
tui_keys r
tui_wait "y" 5
tui_keys y
tui_wait "setmetatable with __gc: false" 5 || fail "__gc: reset did not reload the lesson"
tui_keys l
tui_wait "Lesson" 5
tui_keys 1 2 Enter
tui_wait "12-xpcall-handler.lua:2:" 2 || fail "xpcall handler: no message after switching lessons"
tui_quit_clean || fail "__gc/xpcall: q did not quit cleanly"
tui_stop

# The longest strings a lesson may have compared forever (each comparison
# reads 1 MiB): the watchdog ends it at the 3 s wall time, keys answer.
tui_start 80 24 -- --lessons "$H" --lesson 14
t0=$SECONDS
tui_wait "ran too long without" 3 || fail "compare loop: no message"
echo "compare loop: the message after $((SECONDS - t0)) s"
tui_keys '?'
tui_wait "Block pool" 5 || fail "compare loop: the app does not answer keys"
tui_keys Escape
tui_quit_clean || fail "compare loop: q did not quit cleanly"
tui_stop

# Under en_US.UTF-8 (built here when glibc's locale sources are there, else
# C.UTF-8): the rest of the set, one after another in one app (l NN Enter),
# each ends with its message (the 3 s wall time bounds those that loop) and
# the app still answers keys; lesson 21 sees byte order ("B" < "a"), as
# kvlab check does.
LOC="$TUI_TMP/locale"
mkdir -p "$LOC"
locenv=(LC_ALL=C.UTF-8)
if command -v localedef >/dev/null && localedef -i en_US -f UTF-8 "$LOC/en_US.UTF-8" >/dev/null 2>&1; then
    locenv=(LOCPATH="$LOC" LC_ALL=en_US.UTF-8)
fi
echo "locale: ${locenv[*]}"
tui_start 80 24 "${locenv[@]}" -- --lessons "$H" --lesson 13
for n in 13 15 16 17 18 19 20; do
    if [ "$n" != 13 ]; then
        tui_keys l
        tui_wait "Lesson" 5
        tui_keys "${n:0:1}" "${n:1:1}" Enter
    fi
    t0=$SECONDS
    tui_wait "hostile/$n-" 5 || fail "lesson $n: no message naming its file"
    echo "lesson $n: its message after $((SECONDS - t0)) s"
    tui_screen | grep -q "The lesson stopped with an error" || fail "lesson $n: not shown as an error"
    tui_keys '?'
    tui_wait "Block pool" 5 || fail "lesson $n: the app does not answer keys"
    tui_keys Escape
    tui_wait_gone "Block pool" 5
done
tui_keys l
tui_wait "Lesson" 5
tui_keys 2 1 Enter
tui_wait 'string order: byte order' 5 || fail "lesson 21: strings do not compare byte by byte in the app"
tui_quit_clean || fail "en_US set: q did not quit cleanly"
tui_stop

# SIGTERM while comparing them: the app ends promptly, terminal restored.
tui_start 80 24 -- --lessons "$H" --lesson 14
tui_wait "Lesson 14/" 10
apppid=$(tui_app_pid) || fail "cannot find the kvlab process"
kill -TERM "$apppid"
tui_wait "STTY-DONE" 3 || fail "SIGTERM during the compare loop: the app did not end"
tui_screen | grep -q "EXIT:143" || fail "SIGTERM during the compare loop: expected exit 143"
tui_stop

# SIGTERM while lesson code loops: the app ends promptly, terminal restored.
tui_start 80 24 -- --lessons "$H" --lesson 2
tui_wait "Lesson 2/" 10
apppid=$(tui_app_pid) || fail "cannot find the kvlab process"
kill -TERM "$apppid"
tui_wait "STTY-DONE" 3 || fail "SIGTERM: the app did not end"
s=$(tui_screen)
echo "$s" | grep -q "EXIT:143" || fail "SIGTERM: expected exit 143"
echo "$s" | grep -qE '(^| )icanon( |$)' || fail "SIGTERM: terminal left in raw mode"
tui_stop
echo "PASS"

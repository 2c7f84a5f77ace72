#!/usr/bin/env bash
# The app opens on lesson 1 at 80x24, the start-up replay reaches vLLM's
# "Available KV cache memory" line, ? shows the help, q leaves a clean
# terminal; SIGTERM and SIGINT also restore it.
. "$(dirname "$0")/tui_lib.sh"

# --version names the curses and Lua libraries linked.
v=$("$KVLAB" --version)
echo "$v" | grep -q "ncurses" || fail "--version does not name the curses library: $v"
echo "$v" | grep -q "Lua 5.4" || fail "--version does not name Lua: $v"

tui_start 80 24 --
tui_wait "Lesson 1/" 10
tui_advance_until "Available KV cache memory"
tui_wait "q quit" 2
tui_keys '?'
tui_wait "Block pool" 5
tui_keys Escape
tui_wait_gone "Block pool" 5
tui_quit_clean
tui_stop

# A signal while running: the terminal is restored and the exit code says which.
for sig in TERM INT; do
    tui_start 80 24 --
    tui_wait "Lesson 1/" 10
    apppid=$(tui_app_pid) || fail "cannot find the kvlab process"
    kill -"$sig" "$apppid"
    tui_wait "STTY-DONE" 10
    s=$(tui_screen)
    want=$((128 + $(kill -l "$sig")))
    echo "$s" | grep -q "EXIT:$want" || fail "SIG$sig: expected exit $want"
    echo "$s" | grep -qE '(^| )icanon( |$)' || fail "SIG$sig: terminal left in raw mode"
    echo "$s" | grep -qE '(^| )echo( |$)' || fail "SIG$sig: echo left off"
    tui_stop
done
echo "PASS"

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
    tui_signal_restores "$sig"
done
echo "PASS"

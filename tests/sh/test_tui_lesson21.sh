#!/usr/bin/env bash
# Lesson 21, challenge 1 (the length check): put Llama 3.1 8B on an RTX 4090
# from the flags view; vLLM's error shows in the text view and the log, the
# memory bar shows the subtraction that did not fit, and the app goes on.
. "$(dirname "$0")/tui_lib.sh"

tui_start 100 30 -- --lesson 21
tui_wait "Lesson 21/" 10
tui_wait "Playground" 10
tui_keys n
tui_wait "the length check" 10
# The lesson points at the gpu flag: f selects it, Enter edits it.
tui_keys f
tui_wait "Esc: done" 5
tui_keys Enter C-u r t x - 4 0 9 0 Enter
tui_wait "To serve at least one request" 10
tui_wait "did not start" 5   # the status line (the log has the message in full)
s=$(tui_screen)
echo "$s" | grep -q "No server is running" || fail "the pool should say no server runs"
# The goal was reached: the lesson narrates the error and moves on.
tui_wait "There it is" 10
tui_keys Escape
tui_wait "f: edit" 5
tui_quit_clean
echo "PASS"

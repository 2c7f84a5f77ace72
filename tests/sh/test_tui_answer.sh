#!/usr/bin/env bash
# Typed input goes where the learner expects, and a right answer's
# explanation stays readable. Fixture tests/sh/tui_lessons_goal: a goal met in
# the flags view, then at once a question, then a new page.
. "$(dirname "$0")/tui_lib.sh"
LESSONS="$(cd "$(dirname "$0")" && pwd)/tui_lessons_goal"

tui_start 80 24 "KVLAB_LESSONS_DIR=$LESSONS" -- --lesson 1
tui_wait "Goal: Set max-model-len to 2048." 10
# The lesson highlights an early log line: the log view scrolls back to it.
tui_wait "INFO Model loading took" 10
# n before the goal is met says why it waits.
tui_keys n
tui_wait "Reach the goal first" 5
# f names the selected flag; Enter pre-fills the value selected, so typing
# replaces it (4096 then 2048 must not become 40962048).
tui_keys f
tui_wait "max-model-len selected" 5
tui_keys Enter 2 0 4 8 Enter
tui_wait "How many tokens does one block hold?" 10
# The question took the keys from the flags view: the digits answer it.
tui_wait "Enter check" 5
tui_keys 1 5
tui_wait "> 15" 5
tui_keys Enter
tui_wait "Not quite" 5
# The wrong answer left the box empty; f in the empty box opens the flags.
tui_screen | grep -q "> 15" && fail "the wrong answer stayed in the box"
tui_keys f
tui_wait "Esc: done" 5
tui_screen | grep -q "max-model-len.*2048" || fail "max-model-len is no longer 2048"
tui_keys Escape
tui_wait "f: edit" 5
# The right answer: the lesson opens a new page at once, and the
# explanation heads it until n.
tui_keys 1 6 Enter
tui_wait "A new page opened" 10
tui_wait "Right: 16 tokens." 5
tui_wait "block_size tokens" 5
tui_keys n
tui_wait_gone "Right: 16 tokens." 5
tui_quit_clean
echo "PASS"

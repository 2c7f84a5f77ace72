#!/usr/bin/env bash
# A question end to end (wrong answer -> verdict and hint, right answer ->
# the lesson goes on), the lesson list, reset with confirmation, and a lesson
# that fails at run time: the error shows in the text view, the app keeps
# running. Uses the fixture lessons in tests/sh/tui_lessons.
. "$(dirname "$0")/tui_lib.sh"
LESSONS="$(cd "$(dirname "$0")" && pwd)/tui_lessons"

tui_start 100 30 "KVLAB_LESSONS_DIR=$LESSONS" -- --lesson 1
tui_wait "Lesson 1/3" 10
tui_keys n
tui_wait "How many tokens does one block hold?" 5
tui_keys 1 5 Enter
tui_wait "Not quite" 5
tui_wait "title says it" 2
tui_keys BSpace BSpace 1 6 Enter
tui_wait "Answered." 5
tui_wait "Lesson complete" 5

# Reset asks first; n keeps the lesson where it is.
tui_keys r
tui_wait "Start this lesson again" 5
tui_keys n
tui_wait_gone "Start this lesson again" 5
tui_wait "Answered." 2

# The lesson list opens lesson 3, which fails on its second step.
tui_keys l
tui_wait "Fixture: a lesson that fails" 5
tui_keys Down Down Enter
tui_wait "Lesson 3/3" 5
tui_wait "About to fail" 5
tui_keys n
tui_wait "The lesson stopped with an error" 5
tui_wait "03-lesson-error.lua:12" 5
# Still alive: help opens and closes, then a clean quit.
tui_keys '?'
tui_wait "Block pool" 5
tui_keys Escape
tui_wait_gone "Block pool" 5
tui_quit_clean
echo "PASS"

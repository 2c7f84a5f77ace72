#!/usr/bin/env bash
# A failed start leaves its log at 80x24. Lesson 21, challenge 1: a
# max-model-len past the model's own limit is refused before start-up (no
# memory plan at all): the start-up log still shows the refusal, from its
# first words, the memory view says nothing was allocated, and the page says
# why this lever cannot reach the length check. Then a card too small for
# the weights (a plan that fails loading): the log scrolls to the error's
# first words rather than its tail. At 120 columns the footer says what
# space does next: "space pause" while running, "space run" when paused.
. "$(dirname "$0")/tui_lib.sh"

tui_start 80 24 -- --lesson 21
tui_wait "Playground" 10
tui_keys n
tui_wait "the length check" 10
tui_keys f
tui_wait "Esc: done" 5
# The lesson highlights gpu (selected first); max-model-len is two rows down.
tui_keys Down Down
tui_wait "< 131072 >" 5
tui_keys Enter C-u 5 0 0 0 0 0 Enter
tui_wait "max-model-len = 500000: the server did not start" 10
# the flags take the column while edited: the log is one Tab away, and the
# text view's cut error says so rather than "see the log"
tui_wait "(Tab: the log)" 5
tui_keys Escape
tui_wait "f: edit" 5
tui_wait "! ERROR User-specified" 5          # the log holds the refusal, from its start
tui_wait "Nothing allocated" 5              # the memory view says what it can
s=$(tui_screen)
if echo "$s" | grep -qF "No server started yet"; then fail "a refused start left an empty view"; fi
tui_wait "before it sizes the pool" 5       # the lesson says why this lever fails

# A plan that fails: weights too big for a 16 GiB card. The error's first
# words are on screen (vLLM's "torch.OutOfMemoryError ..." line).
tui_keys f
tui_wait "Esc: done" 5
tui_keys Enter C-u Enter                    # max-model-len back to its default
tui_wait "max-model-len = (default)" 10
tui_keys Up Up Enter C-u t 4 - 1 6 g b Enter
tui_wait "gpu = t4-16gb: the server did not start" 10
tui_keys Escape
tui_wait "f: edit" 5
tui_wait "! ERROR" 5
tui_wait "torch.OutOfMemoryError" 5
tui_quit_clean
tui_stop
rm -rf "${TUI_STATE:?}"/*   # a fresh start: the playground's first server runs

# space: the footer names what it does next.
tui_start 120 40 -- --lesson 21
tui_wait "Playground" 10
tui_wait "space pause" 5
tui_keys Space
tui_wait "paused" 5
tui_wait "space run" 5
if tui_screen | grep -qF "space pause"; then fail "the footer says 'space pause' while paused"; fi
tui_keys Space
tui_wait "space pause" 5
tui_quit_clean
echo "PASS"

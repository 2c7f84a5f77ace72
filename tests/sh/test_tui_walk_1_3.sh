#!/usr/bin/env bash
# A learner's walk through lessons 1-3 in the app, keys only: read the pool
# size off the screen (lesson 1), work out the K/V vectors a decode step
# reads (lesson 2), switch the KV cache off in the flags view and read the
# work it cost (lesson 3). Every answer is taken from what the screen shows.
. "$(dirname "$0")/tui_lib.sh"

# screen_num REGEX: the first number (digits and commas) captured by REGEX's group.
screen_num() {
    { tui_screen | tr '\n' ' ' | sed -E 's/[│|] +[│|]/ /g; s/ +/ /g' | grep -oE "$1" | head -1 |
        grep -oE '[0-9][0-9,]*' | head -1 | tr -d ,; } || true
}

tui_start 100 40 -- --lesson 1
tui_wait "Lesson 1/" 10
tui_advance_until "Read it off the screen" 30
tokens=$(screen_num 'GPU KV cache size: [0-9,]+')
[ -n "$tokens" ] || fail "lesson 1: the pool size is not on screen"
tui_keys "$tokens" Enter
tui_advance_until "Lesson complete" 30

# n on a finished lesson opens the next one.
tui_keys n
tui_wait "Lesson 2/" 10
# The first page says how many K/V vectors one token leaves behind.
tui_wait "vectors" 10
per_token=$(screen_num '= [0-9,]+ vectors')
[ -n "$per_token" ] || fail "lesson 2: the vectors per token are not on screen"
tui_advance_until "A decode step processes" 30
tui_keys "$((per_token * 1000))" Enter
tui_advance_until "Lesson complete" 30

tui_keys n
tui_wait "Lesson 3/" 10
tui_advance_until "Turn the KV cache off" 30
tui_keys f
tui_wait "Esc: done" 5
tui_keys Right
tui_wait "kv-cache = off: server restarted" 5
tui_keys Escape
# The page after the restart reports the work the run without a cache did.
tui_advance_until "This time:" 30
work=$(screen_num 'This time: [0-9,]+ tokens')
[ -n "$work" ] || fail "lesson 3: the work without the cache is not on screen"
tui_advance_until "Without the cache, how many" 30
tui_keys "$work" Enter
tui_advance_until "Lesson complete" 30

# The lesson list marks all three done.
tui_keys l
tui_wait "[x]  1" 5
tui_wait "[x]  2" 5
tui_wait "[x]  3" 5
tui_keys Escape
tui_quit_clean
echo "PASS"

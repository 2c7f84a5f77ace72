#!/usr/bin/env bash
# The help overlay at 80x24 in plain ASCII without colour (tui/app/ui_chrome.c):
# it is taller than the screen, so it scrolls (Down, PgDn, End, Home) and its
# last legend line is reachable; every glyph of the block pool has its line
# (':' cached, '!' preempted, 'o' an empty slab slot). Home and End are
# taken in all their common encodings (tui/app/app_term.c): ESC [ 1 ~ and
# ESC [ 4 ~ (tmux, screen, PuTTY), ESC [ H / F and ESC O H / F (xterm), under
# a TERM whose terminfo names them (screen) and one that gives two of them
# other names (xterm-256color: find and select).
. "$(dirname "$0")/tui_lib.sh"
export KVLAB_LESSONS_DIR="$KVLAB_SOURCE_DIR/lessons"
fail() { echo "FAIL: $*" >&2; tui_screen >&2 || true; exit 1; }

help_range() { tui_screen | grep -oE 'lines [0-9]+-[0-9]+ of [0-9]+' | head -1; }

for term in xterm-256color screen; do
    # ESCDELAY: a loaded machine may hand the app ESC apart from the rest of the sequence
    tui_start 80 24 TERM=$term ESCDELAY=1000 -- --ascii --no-color
    tui_wait "Lesson 1/" 10
    tui_keys '?'
    tui_wait "lines 1-20 of" 5 || fail "$term: the help does not say it has more lines than fit"
    total=$(help_range | sed -E 's/.* of //')
    [ "$total" -gt 22 ] || fail "$term: help has $total lines"
    tui_wait "more below" 3 || fail "$term: no 'more below' mark"
    # Down scrolls one line
    tui_keys Down
    tui_wait "lines 2-21 of $total" 5 || fail "$term: Down did not scroll"
    # each encoding of End, then of Home
    for pair in $'\033[4~ \033[1~' $'\033[F \033[H' $'\033OF \033OH'; do
        end=${pair% *} home=${pair#* }
        tui_keys -l -- "$end"
        tui_wait "lines $((total - 19))-$total of $total" 5 || fail "$term: End as $(printf %q "$end") not taken"
        tui_wait "lesson done / started / not started" 3 || fail "$term: the last legend line is not reachable"
        tui_keys -l -- "$home"
        tui_wait "lines 1-20 of $total" 5 || fail "$term: Home as $(printf %q "$home") not taken"
    done
    tui_stop
done

# The pool's legend, page by page (PgDn), in ASCII: each glyph on its own line.
tui_start 80 24 -- --ascii --no-color
tui_wait "Lesson 1/" 10
tui_keys '?'
tui_wait "lines 1-20 of" 5
all=$(tui_screen)
for i in 1 2 3; do tui_press NPage || fail "PgDn $i did not scroll the help"; all="$all"$'\n'"$(tui_screen)"; done
for want in ': +free, still holding a cached prefix' '! +flash: a preempted' 'o +reserved for a request.s slab' \
            '\. +free, never used' '@ +the null block' 'k +the free part of a KV pool bar' '! +a preemption$' \
            '! +an error line'; do
    grep -qE -- "\| +$want" <<<"$(sed -E 's/ +\| *\|? *$//' <<<"$all")" || { echo "$all" >&2; fail "no legend line '$want'"; }
done
# ':' means one thing
n=$(grep -E '\|   : ' <<<"$all" | sort -u | wc -l)
[ "$n" = 1 ] || fail "':' has $n legend lines"
tui_keys Escape
tui_wait_gone "lines 1-20" 5
echo "PASS"

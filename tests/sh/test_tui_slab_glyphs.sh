#!/usr/bin/env bash
# Lesson 12's slabs at 80x24 without colour (NO_COLOR, --ascii): the page
# says a slab's blocks that hold no token are small circles (o), most of
# every slab. At 80x24 one cell of the pool stands for hundreds of blocks;
# a cell that is mostly reserved-but-empty shows o, so the waste reads by
# glyph alone (it showed the fill level, '_' or '-', and o only where a
# cell was empty to the last block: a few o's among underscores). Also at
# 140x45 in colour: cells of empty slab blocks beside their requests' letters.
. "$(dirname "$0")/tui_lib.sh"

# the first question's answer as the app's accounting (textbook) computes it
ans=$("$KVLAB" check 12 --accounting textbook 2>/dev/null | sed -n "s/.*accepted '\([0-9]*\) requests'.*/\1/p" | head -1)
[ -n "$ans" ] || fail "no answer for lesson 12's first question from kvlab check"

to_slabs() {
    tui_wait "Lesson 12/" 10
    tui_advance_until "How many requests can hold a slab" 4
    tui_keys "$ans" Enter
    tui_advance_until "Chat traffic in slabs" 4
    tui_wait "What share of the reserved slots" 30
    tui_wait "empty" 10
}

# The pool's grid: the rows between the pool's title and its status line,
# right of the text column's border and the pool's (two borders side by side).
grid() {
    tui_screen | awk '/block pool \(contiguous slabs\)/ {on = 1; next}
        on && /used [0-9,]+ \(/ {exit}
        on {print}' | sed -e 's/^.*\(||\|││\)//' -e 's/[|│]$//'
}

tui_start 80 24 NO_COLOR=1 -- --lesson 12 --ascii
to_slabs
g=$(grid)
cells=$(printf '%s' "$g" | tr -d ' \n' | wc -c)
os=$(printf '%s' "$g" | tr -cd 'o' | wc -c)
echo "80x24: $os of $cells cells are o"
[ "$cells" -ge 20 ] || fail "the pool grid was not found ($cells cells)"
# the engine's figure: most reserved slots are empty (the page asks for it)
[ $((os * 2)) -ge "$cells" ] || fail "only $os of $cells pool cells show o (empty slab blocks) at 80x24"
tui_quit_clean
tui_stop
rm -rf "${TUI_STATE:?}"/*   # from the lesson's start again

tui_start 140 45 -- --lesson 12
to_slabs
g=$(grid)
os=$(printf '%s' "$g" | grep -o -e '◦' -e 'o' | wc -l)
letters=$(printf "%s" "$g" | tr -d "o" | tr -cd "A-Za-z" | wc -c)
echo "140x45: $os empty cells, $letters letters"
[ "$os" -ge 50 ] && [ "$letters" -ge 20 ] || fail "140x45: the slabs should show their empty blocks (◦) beside their requests' letters"
tui_quit_clean
echo "PASS"

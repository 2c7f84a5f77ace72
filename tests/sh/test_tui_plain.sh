#!/usr/bin/env bash
# NO_COLOR=1, --no-color, LANG=C and --ascii: the screens carry no stray
# escape bytes, no colour, and (LANG=C, --ascii) nothing but ASCII.
. "$(dirname "$0")/tui_lib.sh"

check_screen() {
    local what=$1 ascii=$2
    local s
    s=$(tui_tmux capture-pane -p -t "$TUI_SESSION")
    if printf '%s' "$s" | LC_ALL=C grep -q $'\x1b'; then fail "$what: escape byte on screen"; fi
    if printf '%s' "$s" | grep -qE '\[[0-9;]*m|\[\?[0-9]+[hl]'; then fail "$what: escape sequence text on screen"; fi
    if [ "$ascii" = 1 ] && printf '%s' "$s" | LC_ALL=C grep -q '[^[:print:][:space:]]'; then
        fail "$what: non-ASCII bytes on screen"
    fi
}

no_colour_codes() {
    local what=$1
    # With -e tmux writes the cells' attributes as SGR codes: no colour may appear.
    if tui_tmux capture-pane -e -p -t "$TUI_SESSION" | grep -qE $'\x1b\\[[0-9;]*(3[0-7]|38;[25]|4[0-7]|48;[25])[;m]'; then
        fail "$what: colour codes on screen"
    fi
}

tui_start 80 24 NO_COLOR=1 --
tui_advance_until "Available KV cache memory"
check_screen "NO_COLOR=1" 0
no_colour_codes "NO_COLOR=1"
tui_quit_clean
tui_stop

tui_start 80 24 -- --no-color
tui_advance_until "Available KV cache memory"
no_colour_codes "--no-color"
tui_quit_clean
tui_stop

tui_start 80 24 LANG=C LC_ALL=C --
tui_advance_until "Available KV cache memory"
check_screen "LANG=C" 1
tui_keys '?'
tui_wait "Block pool" 5
check_screen "LANG=C help" 1
tui_keys Escape
tui_quit_clean
tui_stop

tui_start 80 24 -- --ascii
tui_advance_until "Available KV cache memory"
check_screen "--ascii" 1
tui_quit_clean
echo "PASS"

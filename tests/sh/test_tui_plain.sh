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

# Colour levels: 8 colours (TERM=screen) use only the basic colours; 256
# colours (TERM=screen-256color) use the extended palette. Either way the
# screen carries no stray escape bytes.
tui_start 80 24 TERM=screen --
tui_advance_until "Available KV cache memory"
check_screen "TERM=screen" 0
tui_tmux capture-pane -e -p -t "$TUI_SESSION" | grep -qE $'\x1b\\[[0-9;]*3[1-7]m' || fail "8 colours: no colour drawn"
if tui_tmux capture-pane -e -p -t "$TUI_SESSION" | grep -qE $'\x1b\\[[0-9;]*38;5;'; then fail "8 colours: 256-colour codes used"; fi
tui_quit_clean
tui_stop

tui_start 80 24 TERM=screen-256color --
tui_advance_until "Available KV cache memory"
check_screen "TERM=screen-256color" 0
tui_tmux capture-pane -e -p -t "$TUI_SESSION" | grep -qE $'\x1b\\[[0-9;]*38;5;' || fail "256 colours: palette not used"
tui_quit_clean
tui_stop

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

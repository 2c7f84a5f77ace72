#!/usr/bin/env bash
# A follower at 80x24 reads what the room tells it whole and in the right
# voice: the room's messages too long for the header ("Following USER in
# room ...", "The presenter leads: x to explore", "On your own from here:
# ...; x rejoins USER") are on the footer row to their last word; the
# presenter's prediction on lesson 16's first page reads "USER predicted
# 20", never "Your prediction"; when the presenter quits, the header says
# "presenter left" and the text view says the presenter has left instead of
# "the presenter moves on".
. "$(dirname "$0")/tui_lib.sh"

ROOMS=$(mktemp -d /tmp/kvlab-roomfol.XXXXXX)
chmod 0700 "$ROOMS"
XDG_RUN="$TUI_TMP/run"
mkdir -m 0700 "$XDG_RUN"
room_cleanup() { tui_cleanup; rm -rf "$ROOMS"; }
trap room_cleanup EXIT
USER_NAME=$(id -un)

TUI_ROOMS=$ROOMS
TUI_ROOMS_RUN=$XDG_RUN
room_start() { tui_room_start "$@"; }
on() { local s=$1; shift; TUI_SESSION=$s "$@"; }
screen_of() { TUI_SESSION=$1 tui_screen; }

room_start pres 80 24 -- --present cls --lesson 16
on pres tui_wait "presenting to 0" 10
room_start fol 80 24 -- --follow cls
on pres tui_wait "presenting to 1" 10
on fol tui_wait "Following $USER_NAME in room 'cls': x explores on your own" 10
on fol tui_wait "the 24 reviews will wait?" 10
# lesson 16 sets the scene before it asks
screen_of fol | grep -qF "24 code reviews arrive" || fail "lesson 16's first page asks before it sets the scene"

# A key the follower may not use: the hint, whole.
on fol tui_keys n
on fol tui_wait "The presenter leads: x to explore" 5

# The presenter predicts; the follower's page says whose prediction it was.
on pres tui_keys 2 0 Enter
on pres tui_wait "Your prediction: 20" 10
on fol tui_wait "Right on." 15
on fol tui_keys Up Up Up Up Up Up Up Up Up Up
on fol tui_wait "$USER_NAME predicted 20." 5
if screen_of fol | grep -qE "Your prediction|You predicted"; then fail "the follower's page calls the presenter's prediction its own"; fi

# Breaking away and back: the room's messages, whole.
on fol tui_keys x
on fol tui_wait "On your own from here: your flags and engine; x rejoins $USER_NAME" 5
on fol tui_keys x
on fol tui_wait "Back with $USER_NAME" 5
on fol tui_wait "following" 5

# The presenter quits: the follower says plainly that the presenter left.
on pres tui_keys q
# q asks first while the follower is attached (or quits at once without one)
asked_or_quit() { screen_of pres | grep -qE "Quit kvlab\?|EXIT:"; }
tui_until 10 asked_or_quit || fail "q neither asked nor quit"
if screen_of pres | grep -qF "Quit kvlab?"; then on pres tui_keys y; fi
on pres tui_wait "EXIT:" 10
on fol tui_wait "presenter left" 10
on fol tui_wait "The presenter has left" 5
if screen_of fol | grep -qE "the presenter (answers|moves on)|the presenter's goal"; then
    fail "the follower still says the presenter leads after it left"
fi
on fol tui_keys q
on fol tui_wait "EXIT:0" 10
echo "PASS"

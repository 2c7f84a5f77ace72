#!/usr/bin/env bash
# A follower that comes before its presenter (80x24): the waiting text names
# the room as typed (USER/ROOM), x says there is nothing to explore yet and
# does not break away; once the presenter opens a lesson, x does break away.
# A follower never opens the GPU (#26): with KVLAB_DEVICE unset, a build
# with a GPU backend makes the presenter say which backend it took on
# stderr ("CUDA backend on ...", or "no NVIDIA driver ...; using the host
# backend"); the follower says neither, because it never tries (checked when
# the presenter's line shows the build has a GPU backend).
# (kvlab --follow of a user this machine does not have: test_rooms_cli.sh.)
. "$(dirname "$0")/tui_lib.sh"
LESSONS="$(cd "$(dirname "$0")" && pwd)/tui_lessons_room"
ROOMS="$TUI_TMP/rooms"
mkdir -m 1777 "$ROOMS"
mkdir -m 0700 "$TUI_TMP/run"

# room_start SESSION -- [kvlab args...]: kvlab at 80x24 in its own session
room_start() {
    local s=$1 args=""
    shift 2
    for a in "$@"; do args="$args '$a'"; done
    cat > "$TUI_TMP/run-$s.sh" <<EOS
#!/bin/sh
$TUI_HUP_TRAP
export XDG_STATE_HOME='$TUI_STATE' KVLAB_LESSONS_DIR='$LESSONS' KVLAB_ROOMS_DIR='$ROOMS' XDG_RUNTIME_DIR='$TUI_TMP/run'
unset KVLAB_DEVICE
'$KVLAB'$args 2>'$TUI_TMP/stderr-$s'
printf 'EXIT:%s\n' "\$?"
stty -a | tr ' ;' '\n\n' | grep -E '^-?(icanon|echo)\$' | tr '\n' ' '
printf '\nSTTY-DONE\n'
sleep 600
EOS
    chmod 755 "$TUI_TMP/run-$s.sh"
    tui_tmux new-session -d -s "$s" -x 80 -y 24 "$TUI_TMP/run-$s.sh"
    tui_tmux set-option -t "$s" window-size manual >/dev/null 2>&1 || true
}
on() { local s=$1; shift; TUI_SESSION=$s "$@"; }
TUI_SESSION=fol

me=$(id -un)
room_start fol -- --follow "$me/early"
on fol tui_wait "waiting for the presenter of room '$me/early'" 10
# Nothing open to break away from: neither the footer nor the page offers x.
s=$(on fol tui_screen)
if printf '%s' "$s" | grep -q "x explore\|x: explore"; then
    TUI_SESSION=fol fail "x is offered while no lesson is open"
fi
on fol tui_keys x
on fol tui_wait "Nothing to explore until the presenter opens a" 5
on fol tui_wait "waiting for presenter" 2    # the header: still following, not on its own
if on fol tui_screen | head -1 | grep -q "on your own"; then TUI_SESSION=fol fail "x broke away with no lesson to explore"; fi

room_start pres -- --present early --lesson 1
on pres tui_wait "presenting to 1" 15
on fol tui_wait "following" 10
on fol tui_wait "x explore on your own" 5    # a lesson is open: now x is offered
on fol tui_keys x
on fol tui_wait "On your own from here" 5
on fol tui_quit_clean
on pres tui_quit_clean
# the backend lines (stderr, before each screen opened)
backend_re='backend on |using the host backend|opening the GPU'
if grep -qE "$backend_re" "$TUI_TMP/stderr-pres"; then
    echo "presenter: $(grep -E "$backend_re" "$TUI_TMP/stderr-pres" | head -1)"
    if grep -qE "$backend_re" "$TUI_TMP/stderr-fol"; then
        fail "the follower tried the GPU: $(grep -E "$backend_re" "$TUI_TMP/stderr-fol" | head -1)"
    fi
else
    echo "this build has no GPU backend: the follower's device not checked"
fi
echo "PASS"

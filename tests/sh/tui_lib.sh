# Helpers for the tmux-driven tests of the lesson app (sourced by
# tests/sh/test_tui_*.sh). Each test gets its own tmux server (-S, a private
# socket in its temporary folder), its own empty XDG_STATE_HOME (so real progress is never touched)
# and polls capture-pane with a timeout instead of sleeping a fixed time.
# Exit 77 (ctest: skipped) when tmux or the app is not available.

# No pipefail: the tests pipe screens into `grep -q`, which exits at the
# first match; the writer may then die of SIGPIPE, and pipefail would turn a
# match into a failure now and then.
set -eu

: "${KVLAB:?KVLAB must point at the kvlab binary}"
if ! command -v tmux >/dev/null 2>&1; then
    echo "tmux not installed: skipping"
    exit 77
fi
if [ "${KVLAB_TUI:-1}" = "0" ] || [ "${KVLAB_TUI:-}" = "OFF" ]; then
    echo "built without the lesson app: skipping"
    exit 77
fi

TUI_STATE=$(mktemp -d)
TUI_TMP=$(mktemp -d)
TUI_SOCK="$TUI_TMP/tmux.sock"
TUI_SESSION=app
export XDG_STATE_HOME="$TUI_STATE"

tui_tmux() { tmux -S "$TUI_SOCK" -f /dev/null "$@"; }

# The first line of every pane's script. When tmux ends a session the
# kernel hangs up the pane's shell (the session leader); when that shell
# exits it sends SIGHUP and SIGCONT to the app's process group. A SIGCONT
# that lands while an ASan build's leak check has stopped the app's threads
# (ptrace) cancels the stop, and the check then waits for it at full CPU
# forever. So the shell waits for the app, which sees its terminal gone
# (end of input) and leaves on its own, and exits after it.
TUI_HUP_TRAP="trap 'exit 129' HUP"

# tui_stop: end this test's tmux server and wait until it is gone, so the
# next tui_start does not race a server that is still shutting down.
tui_stop() {
    tui_tmux kill-server >/dev/null 2>&1 || true
    local i
    for i in $(seq 50); do
        tui_tmux has-session >/dev/null 2>&1 || break
        sleep 0.1
    done
    rm -f "$TUI_SOCK"
    tui_reap
}

# tui_own_pids: the kvlab processes this test started, in any of its
# sessions, also those whose terminal is gone: their XDG_STATE_HOME is this
# test's own folder.
tui_own_pids() {
    local c p
    for c in $(grep -lx kvlab /proc/[0-9]*/comm 2>/dev/null); do
        p=${c%/comm}
        tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qxF "XDG_STATE_HOME=$TUI_STATE" && echo "${p#/proc/}"
    done
    return 0
}

# tui_reap: once the terminals are gone the apps leave on their own (end of
# input); one still there after a while is stuck, and is killed, so that no
# test leaves a process behind that takes a CPU from the tests after it.
tui_reap() {
    local i pids
    for i in $(seq $((50 * ${TUI_TIMEOUT_SCALE:-3}))); do
        pids=$(tui_own_pids)
        [ -z "$pids" ] && return 0
        sleep 0.1
    done
    echo "note: killing kvlab processes still running after their terminal went away: $pids" >&2
    kill -KILL $pids 2>/dev/null || true
}

tui_cleanup() {
    tui_stop
    rm -rf "$TUI_STATE" "$TUI_TMP"
}
trap tui_cleanup EXIT

# tui_start COLS ROWS [ENV=VAL ...] -- [kvlab args...]
# Runs kvlab in a fresh session; when it exits the pane prints EXIT:<code>
# and the terminal modes, then waits (so the test can look at the screen).
tui_start() {
    local cols=$1 rows=$2
    shift 2
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    [ "${1:-}" = "--" ] && shift
    # The app tests type the textbook's figures (the seed's, kvlab --accounting
    # textbook); kvlab check covers every release of the set on its own.
    # TUI_ACCOUNTING= (empty) runs the app's default, the newest release.
    local args=""
    [ -n "${TUI_ACCOUNTING-textbook}" ] && args=" '--accounting' '${TUI_ACCOUNTING-textbook}'"
    for a in "$@"; do args="$args '$a'"; done
    cat > "$TUI_TMP/run.sh" <<EOS
#!/bin/sh
$TUI_HUP_TRAP
export XDG_STATE_HOME='$TUI_STATE'
${envs[@]+$(printf 'export %q\n' "${envs[@]}")}
'$KVLAB'$args
code=\$?
printf 'EXIT:%s\n' "\$code"
stty -a | tr ' ;' '\n\n' | grep -E '^-?(icanon|echo)\$' | tr '\n' ' '
printf '\nSTTY-DONE\n'
sleep 600
EOS
    chmod +x "$TUI_TMP/run.sh"
    tui_tmux new-session -d -s "$TUI_SESSION" -x "$cols" -y "$rows" "$TUI_TMP/run.sh"
    tui_tmux set-option -g window-size manual >/dev/null 2>&1 || true
}

# tui_app_pid: the kvlab process in the pane (a child of the pane's shell),
# found through /proc so the tests need no procps.
tui_app_pid() {
    local shpid p i
    shpid=$(tui_tmux list-panes -t "$TUI_SESSION" -F '#{pane_pid}')
    for i in $(seq $((50 * ${TUI_TIMEOUT_SCALE:-3}))); do
        for p in /proc/[0-9]*; do
            [ -r "$p/stat" ] || continue
            local st
            st=$(cat "$p/stat" 2>/dev/null) || continue
            # comm is in parentheses; the parent pid is the 2nd field after it
            local rest=${st##*) }
            local ppid
            ppid=$(echo "$rest" | cut -d' ' -f2)
            if [ "$ppid" = "$shpid" ] && [ "$(cat "$p/comm" 2>/dev/null)" = "kvlab" ]; then
                echo "${p#/proc/}"
                return 0
            fi
        done
        sleep 0.1
    done
    return 1
}

tui_screen() { tui_tmux capture-pane -p -t "$TUI_SESSION"; }

# tui_wait TEXT [TIMEOUT_S]: wait until TEXT (fixed string) is on screen.
# Waits scale with TUI_TIMEOUT_SCALE (default 3) so a loaded CI machine or an
# ASan build is not mistaken for a hang; they cost nothing when the text shows.
tui_wait() {
    local text=$1 timeout=$(( ${2:-10} * ${TUI_TIMEOUT_SCALE:-3} ))
    local end=$((SECONDS + timeout))
    while [ $SECONDS -le $end ]; do
        if tui_screen | grep -qF -- "$text"; then return 0; fi
        sleep 0.1
    done
    echo "FAIL: '$text' did not appear within ${timeout}s; screen:" >&2
    tui_screen >&2
    return 1
}

# tui_wait_gone TEXT [TIMEOUT_S]
tui_wait_gone() {
    local text=$1 timeout=$(( ${2:-10} * ${TUI_TIMEOUT_SCALE:-3} ))
    local end=$((SECONDS + timeout))
    while [ $SECONDS -le $end ]; do
        if ! tui_screen | grep -qF -- "$text"; then return 0; fi
        sleep 0.1
    done
    echo "FAIL: '$text' still on screen after ${timeout}s" >&2
    tui_screen >&2
    return 1
}

tui_keys() { tui_tmux send-keys -t "$TUI_SESSION" "$@"; }

# tui_press KEY...: send the keys and wait until the screen changes (a
# scaled deadline; returns 1 if it never did). For keys pressed in a loop
# that checks the screen after each: on a busy machine a fixed sleep lets
# the next press go out before the app took this one, and the loop then
# steps past what it looks for.
tui_press() {
    local before end
    before=$(tui_screen)
    tui_keys "$@"
    end=$((SECONDS + 2 * ${TUI_TIMEOUT_SCALE:-3}))
    while [ "$(tui_screen)" = "$before" ]; do
        [ $SECONDS -lt $end ] || return 1
        sleep 0.05
    done
}

# tui_until DEADLINE_S CMD...: run CMD until it succeeds, up to DEADLINE_S
# seconds times TUI_TIMEOUT_SCALE; returns 1 when it never did.
tui_until() {
    local end=$((SECONDS + $1 * ${TUI_TIMEOUT_SCALE:-3}))
    shift
    until "$@"; do
        [ $SECONDS -lt $end ] || return 1
        sleep 0.1
    done
}

# tui_signal_restores SIG: start the app at 80x24, send it SIG and check the
# shell after it: exit code 128 + SIG, the terminal back in canonical mode
# with echo (tui_start's wrapper prints stty and EXIT:rc, then STTY-DONE).
# Leaves the screen for further checks in TUI_SIGNAL_SCREEN; stops tmux.
tui_signal_restores() {
    local sig=$1 apppid want
    tui_start 80 24 --
    tui_wait "Lesson 1/" 10
    apppid=$(tui_app_pid) || fail "cannot find the kvlab process"
    kill -"$sig" "$apppid"
    tui_wait "STTY-DONE" 10
    TUI_SIGNAL_SCREEN=$(tui_screen)
    want=$((128 + $(kill -l "$sig")))
    echo "$TUI_SIGNAL_SCREEN" | grep -q "EXIT:$want" || fail "SIG$sig: expected exit $want"
    echo "$TUI_SIGNAL_SCREEN" | grep -qE '(^| )icanon( |$)' || fail "SIG$sig: terminal left in raw mode"
    echo "$TUI_SIGNAL_SCREEN" | grep -qE '(^| )echo( |$)' || fail "SIG$sig: echo left off"
    tui_stop
}

# tui_set_flag NAME VALUE: in the flags view, select NAME (it must be
# listed) and type VALUE; waits until the server applied it and the view is
# left. Flag rows are read as "││ name   value │" inside the flags box (the
# box sits beside the text view, so its rows start with the two borders).
tui_set_flag() {
    local name=$1 value=$2 names idx i
    tui_keys f
    tui_wait "Esc: done" 5
    names=$(tui_screen | sed -n '/┌ flags/,/└/p' | sed -E 's/.*││ ([a-z][a-z0-9-]*) .*/\1/;t;d')
    idx=$(grep -nxF -- "$name" <<<"$names" | cut -d: -f1 | head -1)
    [ -n "$idx" ] || fail "flag $name is not in the flags view"
    for i in $(seq 24); do tui_keys Up; done
    for i in $(seq $((idx - 1))); do tui_keys Down; done
    tui_keys Enter C-u
    tui_keys -l -- "$value"
    tui_keys Enter
    tui_wait "$name = $value" 15 || fail "--$name $value was not applied"
    tui_keys Escape
    tui_wait "f: edit" 5
}

# tui_advance_until TEXT [MAX_KEYS]: press n (next step) until TEXT shows.
# A page is given until its screen has been still for 0.3 s (the start-up
# replay has finished), at most about a second while something animates.
# After each n it waits (a deadline, scaled) until the screen shows the key
# was taken, so a slow app never gets a second n queued behind the first
# (which skipped the page looked for under load).
tui_advance_until() {
    # More presses allowed on a slow machine (an animated page may eat some).
    local text=$1 max=$(( ${2:-8} * ${TUI_TIMEOUT_SCALE:-3} )) i before="" end
    for i in $(seq "$max"); do
        if [ -n "$before" ]; then
            end=$((SECONDS + 2 * ${TUI_TIMEOUT_SCALE:-3}))
            while [ $SECONDS -lt $end ] && [ "$(tui_screen)" = "$before" ]; do sleep 0.05; done
        fi
        local prev="" still=0 polls=0 cur
        while [ $polls -lt 12 ]; do
            cur=$(tui_screen)
            if printf '%s' "$cur" | grep -qF -- "$text"; then return 0; fi
            if [ "$cur" = "$prev" ]; then still=$((still + 1)); else still=0; fi
            [ $still -ge 3 ] && break
            prev=$cur
            polls=$((polls + 1))
            sleep 0.1
        done
        before=$(tui_screen)
        printf '%s' "$before" | grep -qF -- "$text" && return 0
        tui_keys n
    done
    tui_wait "$text" 5
}

# tui_click TEXT: press and release mouse button 1 on the first cell of the
# first screen line holding TEXT (xterm X10 encoding, which ncurses reads
# as KEY_MOUSE once the app asked for mouse events).
tui_click() {
    local text=$1 row col
    row=$(tui_screen | grep -nF -- "$text" | head -1 | cut -d: -f1)
    [ -n "$row" ] || { echo "FAIL: nothing to click: '$text' not on screen" >&2; return 1; }
    # Columns count characters, not bytes: box-drawing glyphs are one cell each.
    local line prefix
    line=$(tui_screen | sed -n "${row}p")
    prefix=${line%%"$text"*}
    col=$(LC_ALL=C.UTF-8 bash -c 'p=$1; echo $(( ${#p} + 1 ))' _ "$prefix")
    local cb cx cy
    cx=$(printf "\\$(printf '%03o' $((32 + col)))")
    cy=$(printf "\\$(printf '%03o' $((32 + row)))")
    tui_tmux send-keys -t "$TUI_SESSION" -l $'\e[M '"$cx$cy"
    tui_tmux send-keys -t "$TUI_SESSION" -l $'\e[M#'"$cx$cy"
}

tui_resize() { tui_tmux resize-window -t "$TUI_SESSION" -x "$1" -y "$2"; }

# tui_quit_clean: press q; the app must exit 0 and leave the terminal in
# canonical mode with echo on (ncurses restored it), off the alternate screen.
tui_quit_clean() {
    tui_keys q
    tui_wait "STTY-DONE" 10
    local s
    s=$(tui_screen)
    echo "$s" | grep -q "EXIT:0" || { echo "FAIL: kvlab did not exit 0:" >&2; echo "$s" >&2; return 1; }
    echo "$s" | grep -qE '(^| )icanon( |$)' || { echo "FAIL: terminal left in raw mode" >&2; echo "$s" >&2; return 1; }
    echo "$s" | grep -qE '(^| )echo( |$)' || { echo "FAIL: terminal left without echo" >&2; echo "$s" >&2; return 1; }
    if echo "$s" | grep -qF "q quit"; then echo "FAIL: the app's screen is still shown after quitting" >&2; echo "$s" >&2; return 1; fi
}

fail() { echo "FAIL: $*" >&2; tui_screen >&2 || true; exit 1; }

# ---- several apps at once (the classroom tests: one tmux session each) ----

# tui_on SESSION CMD...: run a tui_* command against tmux session SESSION.
tui_on() { local s=$1; shift; TUI_SESSION=$s "$@"; }

# tui_wait_each TEXT TIMEOUT_S SESSION...: tui_wait on every session in turn
# (each gets the whole deadline); fails naming the session that never showed it.
tui_wait_each() {
    local text=$1 timeout=$2 s
    shift 2
    for s in "$@"; do TUI_SESSION=$s tui_wait "$text" "$timeout" || fail "$s: '$text' did not show"; done
}

# tui_shown_by_all REGEX FROM SESSION...: the text REGEX matches first on
# FROM's screen is on every SESSION's screen too; prints it. Fails when
# FROM shows no match or a session does not show it.
tui_shown_by_all() {
    local re=$1 from=$2 want s
    shift 2
    want=$(TUI_SESSION=$from tui_screen | grep -oE -- "$re" | head -1)
    [ -n "$want" ] || TUI_SESSION=$from fail "$from shows nothing like '$re'"
    for s in "$@"; do
        TUI_SESSION=$s tui_screen | grep -qF -- "$want" || TUI_SESSION=$s fail "$s does not show '$want' ($from does)"
    done
    printf '%s\n' "$want"
}

# tui_room_start SESSION COLS ROWS [VAR=VALUE ...] -- [kvlab args...]: kvlab
# in its own tmux session of this test's server, its rooms in $TUI_ROOMS
# (KVLAB_ROOMS_DIR) and $TUI_ROOMS_RUN (XDG_RUNTIME_DIR), the textbook
# accounting as tui_start (TUI_ACCOUNTING= for the app's default release),
# $TUI_ROOM_PREFIX before the command (setpriv ...); when it exits the
# session shows EXIT:rc, the terminal's icanon/echo modes and STTY-DONE.
tui_room_start() {
    local s=$1 cols=$2 rows=$3
    shift 3
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    [ "${1:-}" = "--" ] && shift
    local args=""
    [ -n "${TUI_ACCOUNTING-textbook}" ] && args=" '--accounting' '${TUI_ACCOUNTING-textbook}'"
    for a in "$@"; do args="$args '$a'"; done
    cat > "$TUI_TMP/run-$s.sh" <<EOS
#!/bin/sh
export XDG_STATE_HOME='$TUI_STATE' KVLAB_ROOMS_DIR='$TUI_ROOMS' XDG_RUNTIME_DIR='$TUI_ROOMS_RUN'
${envs[@]+$(printf 'export %q\n' "${envs[@]}")}
${TUI_ROOM_PREFIX:-} '$KVLAB'$args
code=\$?
printf 'EXIT:%s\n' "\$code"
stty -a | tr ' ;' '\n\n' | grep -E '^-?(icanon|echo)\$' | tr '\n' ' '
printf '\nSTTY-DONE\n'
sleep 600
EOS
    chmod 755 "$TUI_TMP/run-$s.sh"
    tui_tmux new-session -d -s "$s" -x "$cols" -y "$rows" "$TUI_TMP/run-$s.sh"
    # per session: tmux 3.3a's server dies on new-session after a global window-size manual
    tui_tmux set-option -t "$s" window-size manual >/dev/null 2>&1 || true
}

# tui_figures SESSION: the figures its views show (the metrics named by
# $TUI_FIGURE_NAMES, usage and the request counts by default, and the pool's
# used count), one line, sorted.
tui_figures() {
    local names=${TUI_FIGURE_NAMES:-kv_cache_usage_perc|num_requests_running|num_requests_waiting}
    TUI_SESSION=$1 tui_screen | grep -oE "($names) +[0-9.,]+%?|used [0-9,]+" |
        tr -s ' ' | sort -u | tr '\n' ';'
}

# tui_same_figures FROM SESSION...: wait (scaled) until every SESSION shows
# FROM's figures; fails with them all otherwise.
tui_same_figures() {
    local from=$1 want end=$((SECONDS + 10 * ${TUI_TIMEOUT_SCALE:-3})) f ok
    shift
    while [ $SECONDS -le $end ]; do
        want=$(tui_figures "$from")
        ok=1
        for f in "$@"; do [ "$(tui_figures "$f")" = "$want" ] || ok=0; done
        if [ $ok = 1 ] && [ -n "$want" ]; then return 0; fi
        sleep 0.2
    done
    echo "FAIL: figures differ: $from '$(tui_figures "$from")'" >&2
    for f in "$@"; do echo "  $f '$(tui_figures "$f")'" >&2; TUI_SESSION=$f tui_screen >&2; done
    exit 1
}

# ---- lesson 16 (the rewind tests) ----

# tui_l16_answers: the prediction and the answer lesson 16's question takes,
# as kvlab check derives them from the engine under the textbook accounting
# tui_start runs the app with; sets $predicted and $answer.
tui_l16_answers() {
    local out
    out=$("$KVLAB" check 16 --lessons "$KVLAB_LESSONS_DIR" --accounting textbook)
    answer=$(sed -nE "s/^    accepted '([^']*)'.*/\1/p" <<<"$out" | head -1)
    predicted=$(sed -nE "s/^    predicted '([^']*)'.*/\1/p" <<<"$out" | head -1)
    [ -n "$answer" ] && [ -n "$predicted" ] || fail "kvlab check 16 gave no accepted answer or prediction"
}

# tui_l16_to_preemption: from lesson 16's first page (tui_l16_answers done)
# through the question and the goal (max-num-seqs 16) to the slow run's
# "Missed it? Press {"; sets $victim, the preempted request the page names.
tui_l16_to_preemption() {
    tui_l16_to_slow_run
    tui_l16_victim
}

# tui_l16_to_slow_run: the same walk, stopping as the slow run ("Watch it
# happen") starts, before its preemption.
tui_l16_to_slow_run() {
    tui_advance_until "type your prediction" 12
    tui_keys -l -- "$predicted"; tui_keys Enter
    tui_wait "You predicted" 60 || fail "the prediction was not taken"
    tui_advance_until ", Enter to" 12
    tui_keys -l -- "$answer"; tui_keys Enter
    tui_advance_until "Goal:" 12
    tui_set_flag max-num-seqs 16
    tui_wait "Watch it happen" 60 || fail "the lesson did not restart for the slow run"
}

# tui_l16_victim: wait for lesson 16's "Missed it? Press {" and set $victim.
tui_l16_victim() {
    tui_wait "Missed it? Press {" 120 || fail "no preemption in the slow run"
    victim=$(tui_screen | grep -oE 'before request [0-9]+' | head -1 | grep -oE '[0-9]+')
    [ -n "$victim" ] || victim=$(tui_screen | grep -oE '\(request [0-9]+\)' | head -1 | grep -oE '[0-9]+')
    [ -n "$victim" ] || fail "the lesson did not name the victim"
}

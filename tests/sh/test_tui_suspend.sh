#!/usr/bin/env bash
# Ctrl-Z (SIGTSTP) gives the terminal back to the shell in a sane state, fg
# brings the app back and redraws it, q then leaves a clean terminal.
. "$(dirname "$0")/tui_lib.sh"

cat > "$TUI_TMP/rc.sh" <<EOS
export XDG_STATE_HOME='$TUI_STATE'
set -m
EOS
tui_tmux new-session -d -s "$TUI_SESSION" -x 80 -y 24 "ENV='$TUI_TMP/rc.sh' sh -i"
tui_wait "#" 5 || tui_wait "$" 5
tui_keys "PS1='READY> '" Enter
tui_wait "READY>" 5
tui_keys "'$KVLAB'" Enter
tui_wait "Lesson 1/" 10
tui_keys C-z
tui_wait "Stopped" 5
tty=$(tui_tmux list-panes -t "$TUI_SESSION" -F '#{pane_tty}')
modes=$(stty -a -F "$tty")
echo "$modes" | grep -qE '(^| )icanon( |;|$)' || fail "suspended: terminal left in raw mode"
echo "$modes" | grep -qE '(^| )echo( |;|$)' || fail "suspended: echo left off"
tui_keys "fg" Enter
tui_wait "Lesson 1/" 10
tui_wait "q quit" 5
tui_keys q
tui_wait_gone "q quit" 5
tui_wait "READY>" 5
modes=$(stty -a -F "$tty")
echo "$modes" | grep -qE '(^| )icanon( |;|$)' || fail "after q: terminal left in raw mode"
echo "PASS"

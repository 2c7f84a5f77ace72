#!/usr/bin/env bash
# The terminal, always: TERM unset, unknown or unable to move the cursor
# (dumb) gets one line and exit 2 before anything is drawn; --lessons with no
# course there is exit 2 with a line; a crash signal (SIGSEGV, SIGABRT) still
# restores the terminal (canonical mode, echo, off the alternate screen)
# and the process dies of that signal.
. "$(dirname "$0")/tui_lib.sh"

expect_refused() { # expect_refused DESCRIPTION PATTERN command...
  local what=$1 pat=$2 out err rc
  shift 2
  out=$("$@" </dev/null 2>"$TUI_TMP/err"); rc=$?
  err=$(cat "$TUI_TMP/err")
  echo "$what: exit $rc: $err"
  [ "$rc" -eq 2 ] || fail "$what: exit $rc, wanted 2"
  [ -z "$out" ] || fail "$what: wrote to the terminal: $out"
  [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "$what: not one line: $err"
  grep -qE -- "$pat" <<<"$err" || fail "$what: message lacks /$pat/"
}
set +e
expect_refused "TERM=dumb" "cannot move the cursor" env TERM=dumb "$KVLAB"
expect_refused "TERM unset" "TERM is not set" env -u TERM "$KVLAB"
expect_refused "TERM unknown" "not known \(TERM=no-such-terminal\)" env TERM=no-such-terminal "$KVLAB"
expect_refused "--lessons /nonexistent" "cannot read /nonexistent/manifest.json" "$KVLAB" --lessons /nonexistent
set -e

for sig in SEGV ABRT; do
    tui_signal_restores "$sig"
    if echo "$TUI_SIGNAL_SCREEN" | grep -qF "q quit"; then fail "SIG$sig: the app's screen is still shown"; fi
done
echo "PASS"

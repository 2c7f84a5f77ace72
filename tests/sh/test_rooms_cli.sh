#!/usr/bin/env bash
# Classroom mode on the command line: kvlab rooms with nothing to list, and
# bad --present / --follow input (exit 2, one clear line, before the terminal
# is touched), including a room folder that is not safe to use.
set -u
: "${KVLAB:?set KVLAB to the kvlab binary}"
: "${KVLAB_SOURCE_DIR:?set KVLAB_SOURCE_DIR}"
export KVLAB_DATA_DIR="$KVLAB_SOURCE_DIR"
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -m 1777 "$tmp/rooms"
mkdir -m 0700 "$tmp/run"
export KVLAB_ROOMS_DIR="$tmp/rooms" XDG_RUNTIME_DIR="$tmp/run" XDG_STATE_HOME="$tmp/state"

out=$("$KVLAB" rooms 2>&1); rc=$?
if [ $rc != 0 ] || ! echo "$out" | grep -qF "No rooms on this machine"; then
    echo "FAIL: kvlab rooms with no rooms (exit $rc): $out"; fail=1
fi

bad() { # expected-substring args...
  local want=$1; shift
  timeout 20 "$KVLAB" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null # 124: waited instead of refusing
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [ $rc != 2 ] || [ -s "$tmp/out" ] || [ "$lines" != 1 ] || ! grep -qF -- "$want" "$tmp/err"; then
    echo "FAIL (exit $rc, $lines stderr lines) kvlab $*"; echo "  wanted: $want"; sed 's/^/  stderr: /' "$tmp/err"
    sed 's/^/  stdout: /' "$tmp/out" | head -3; fail=1
  fi
}

bad "unexpected argument 'extra'" rooms extra
if [ "${KVLAB_TUI:-1}" = "0" ] || [ "${KVLAB_TUI:-}" = "OFF" ] || [ "${KVLAB_LESSONS:-1}" = "0" ]; then
    [ $fail = 0 ] && echo "PASS (kvlab rooms only: this build has no lesson app)"
    exit $fail
fi
bad "'bad name!' is not a room name" --follow 'bad name!'
bad "no user 'nosuchuser-kvlab' on this machine" --follow nosuchuser-kvlab/class
bad "'.hidden' is not a room name" --present .hidden
bad "there is no group 'no-such-group-kvlab'" --present class --allow-group no-such-group-kvlab
bad "use it with --present" --follow class --allow-group users
bad "--allow-group needs a Unix group name" --present class --allow-group
bad "--present and --follow do not go together" --present a --follow b
bad "a follower shows the presenter's lesson" --follow class --lesson 3
# Unsafe folders are refused, with how to fix them.
chmod 0755 "$tmp/run"
bad "XDG_RUNTIME_DIR=$tmp/run is not a folder of yours with mode 0700" --present class
chmod 0700 "$tmp/run"
unset XDG_RUNTIME_DIR
ln -s "$tmp" "$tmp/rooms/kvlab-$(id -u)"
bad "is a symlink" --present class
rm "$tmp/rooms/kvlab-$(id -u)"
mkdir -m 0777 "$tmp/rooms/kvlab-$(id -u)"
chmod 0777 "$tmp/rooms/kvlab-$(id -u)"
bad "has mode 0777, not 0700" --present class
[ $fail = 0 ] && echo "PASS"
exit $fail

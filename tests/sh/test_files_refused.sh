#!/usr/bin/env bash
# Files kvlab reads or writes: a FIFO as manifest.json or as an output is
# refused at once (exit 2, one line) instead of blocking; simulate --events
# naming its own --trace (under another name too) is refused and the trace
# is left as it was; a command whose stdout cannot be written (/dev/full)
# exits non-zero with a message; lesson and chapter titles with escape
# sequences reach `kvlab lessons` and `kvlab check` without them.
set -u
K=${KVLAB:?KVLAB not set}
M=meta-llama/Llama-3.1-8B-Instruct
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
refused() { # refused WHAT PATTERN rc
  local what=$1 pat=$2 rc=$3
  echo "$what: exit $rc: $(head -c 300 "$tmp/err")"
  [ "$rc" -eq 2 ] || bad "$what: exit $rc, wanted 2"
  grep -qE -- "$pat" "$tmp/err" || bad "$what: message lacks /$pat/"
}

if [ "${KVLAB_LESSONS:-1}" != "0" ] && [ "${KVLAB_LESSONS:-}" != "OFF" ]; then
  mkdir "$tmp/fifo-course" && mkfifo "$tmp/fifo-course/manifest.json"
  timeout 20 "$K" check --lessons "$tmp/fifo-course" >/dev/null 2>"$tmp/err"; rc=$?
  refused "manifest.json a FIFO (check)" "pipe \(FIFO\)" $rc
  timeout 20 "$K" lessons --lessons "$tmp/fifo-course" >/dev/null 2>"$tmp/err"; rc=$?
  refused "manifest.json a FIFO (lessons)" "pipe \(FIFO\)" $rc

  # escape sequences in titles: none reach stdout
  mkdir "$tmp/esc"
  printf '%s\n' '{"format_version": 1, "chapters": [{"number": 1, "title": "Ch\u001b]0;owned\u0007"}],' \
    ' "lessons": [{"number": 1, "chapter": 1, "file": "01-x.lua", "title": "Red\u001b[31m title\u009b2J"}]}' \
    >"$tmp/esc/manifest.json"
  printf '%s\n' 'return { id = 1, title = "T\27[2J", run = function(lab)' \
    '  lab.page("P\27[1m"); lab.say("text \27[31mred\27[0m and \194\155 csi"); lab.pause() end }' >"$tmp/esc/01-x.lua"
  "$K" lessons --lessons "$tmp/esc" >"$tmp/out" 2>&1
  "$K" check -v --lessons "$tmp/esc" >>"$tmp/out" 2>&1
  if LC_ALL=C grep -q $'[\x1b\x07]' "$tmp/out" || LC_ALL=C grep -q $'\xc2[\x80-\x9f]' "$tmp/out"; then
    bad "an escape sequence from a lesson reached stdout: $(cat -v "$tmp/out" | head -5)"
  fi
  grep -q "Red" "$tmp/out" && grep -q "red" "$tmp/out" || bad "the titles or the text are gone: $(cat -v "$tmp/out")"
fi

# outputs: a FIFO, and the input itself
printf '%s\n' '{"arrival_s": 0.0, "prompt_tokens": 300, "output_tokens": 20}' \
  '{"arrival_s": 0.01, "prompt_tokens": 200, "output_tokens": 20}' >"$tmp/t.jsonl"
sum0=$(md5sum <"$tmp/t.jsonl")
ln "$tmp/t.jsonl" "$tmp/hard.jsonl"
timeout 20 "$K" simulate $M --gpu h100-80gb --trace "$tmp/t.jsonl" --events "$tmp/hard.jsonl" >/dev/null 2>"$tmp/err"; rc=$?
refused "--events naming --trace (a hard link)" "is the input" $rc
[ "$(md5sum <"$tmp/t.jsonl")" = "$sum0" ] || bad "the trace was overwritten"
mkfifo "$tmp/out.fifo"
timeout 20 "$K" simulate $M --gpu h100-80gb --trace "$tmp/t.jsonl" --events "$tmp/out.fifo" >/dev/null 2>"$tmp/err"; rc=$?
refused "--events a FIFO" "pipe \(FIFO\)" $rc

# stdout that cannot be written
if [ -w /dev/full ]; then
  "$K" serve $M --gpu h100-80gb >/dev/full 2>"$tmp/err"; rc=$?
  echo "serve > /dev/full: exit $rc: $(cat "$tmp/err")"
  [ "$rc" -ne 0 ] || bad "serve > /dev/full exited 0"
  grep -q "could not write the output" "$tmp/err" || bad "no message for the failed write"
  "$K" models >/dev/full 2>"$tmp/err"; rc=$?
  [ "$rc" -ne 0 ] || bad "models > /dev/full exited 0"
fi
[ "$fail" = 0 ] && echo PASS
exit $fail

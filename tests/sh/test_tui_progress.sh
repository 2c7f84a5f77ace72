#!/usr/bin/env bash
# Saving progress fails: the app says why in full (the message names the
# path, longer than the header) in the text view, keeps going, and tries
# again after every step: once the folder can be written, progress is saved
# and the app says so. Left-over temp files of killed saves are removed at
# start; odd values in progress.json are refused, never written back.
. "$(dirname "$0")/tui_lib.sh"
st="$TUI_TMP/state"
mkdir -p "$st"
: > "$st/kvlab"   # a file where the kvlab folder should be: every save fails
tui_start 80 24 "XDG_STATE_HOME=$st" -- --lesson 1
tui_wait "Lesson 1/" 10
tui_wait "Progress not saved" 5 || fail "a failed save is not reported"
# the whole message, wrapped in the text view: the reason and the promise to retry
joined=$(tui_screen | sed 's/[│┐┘]\([│┌└]\).*//' | tr -d '\n│ ')   # the left (text) pane, lines joined
grep -qE "progress\.json\.(tmp-|lock)" <<<"$joined" || fail "the path is not shown in full"
grep -qF "Notadirectory" <<<"$joined" || fail "the reason is not shown in full"
grep -qF "triesagainaftereverystep" <<<"$joined" || fail "the message does not say it keeps trying"
# make the folder writable: the next step's save goes through
rm "$st/kvlab"
mkdir "$st/kvlab"
tui_keys n
tui_wait "Progress saved again" 10 || fail "saving did not resume"
[ -s "$st/kvlab/progress.json" ] || fail "no progress.json after saving resumed"
tui_quit_clean || fail "q did not quit cleanly"
tui_stop

# A killed save's temp file is removed at start; a live process's is kept.
: > "$st/kvlab/progress.json.tmp-2147483646"
: > "$st/kvlab/progress.json.tmp-1"
# a step count no kvlab writes is refused (moved aside), not clamped to 2147483647
echo '{"format_version": 1, "current": 1, "lessons": {"1": {"step": 1e300}}}' > "$st/kvlab/progress.json"
tui_start 80 24 "XDG_STATE_HOME=$st" -- --lesson 1
tui_wait "Lesson 1/" 10
tui_quit_clean || fail "q did not quit cleanly"
tui_stop
[ ! -e "$st/kvlab/progress.json.tmp-2147483646" ] || fail "a dead save's temp file was left"
[ -e "$st/kvlab/progress.json.tmp-1" ] || fail "a live process's temp file was removed"
ls "$st/kvlab" | grep -q "progress.json.corrupt-" || fail "the odd file was not moved aside"
if grep -q 2147483647 "$st/kvlab/progress.json"; then fail "2147483647 written back"; fi
echo "PASS"

#!/usr/bin/env bash
# A layout rule for every page of the course: a line the text view shows as
# it is (it starts with two spaces: a log line, a command, a small table)
# fits the text view of an 80x24 terminal, 36 columns, so the learner sees
# it whole instead of cut. Ordinary paragraphs wrap and are not checked.
# Read from the golden transcripts (tests/golden/lessons/), which
# test_golden_lessons keeps equal to what the lessons print; the width is
# the one lib.fmt's fmt.quote wraps to.
set -uo pipefail
[ "${KVLAB_LESSONS:-1}" = "0" ] && { echo "built without the lesson runtime: skipping"; exit 77; }
: "${KVLAB_SOURCE_DIR:?set KVLAB_SOURCE_DIR}"
WIDTH=36
fail=0
for f in "$KVLAB_SOURCE_DIR"/tests/golden/lessons/*/*.txt; do
    # page text sits between a "--- step" line and the check's own lines
    out=$(LC_ALL=C awk -v w="$WIDTH" -v name="$(basename "$(dirname "$f")")/$(basename "$f")" '
        /^    --- step/ { page = 1; title = $0; next }
        /^  (question|goal|prediction) [0-9]+:/ { page = 0; next }
        /^    (refused|accepted|engine:|\[lessons|set --|reached|not reached|wrong lever|predicted|outcome:)/ { next }
        /^(PASS|FAIL|kvlab check)/ { page = 0; next }
        page && /^  / {
            s = $0; gsub(/[\200-\277]/, "", s)      # count characters, not UTF-8 bytes
            if (length(s) > w && !seen[$0]++) {
                sub(/^ *--- /, "", title)
                printf "%s %s: %d columns (the text view has %d): %s\n", name, title, length(s), w, $0
            }
        }' "$f")
    if [ -n "$out" ]; then
        printf 'FAIL  %s\n' "$out"
        fail=1
    fi
done
[ "$fail" = 0 ] && echo "every as-is line of every page fits $WIDTH columns"
exit $fail

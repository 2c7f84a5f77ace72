#!/usr/bin/env bash
# The course's running examples mean one set of figures everywhere.
#
# Every lesson that runs example A, B or C notes its figures in its check
# transcript (lessons/lib/course.lua course.note: a line "example B
# +max-model-len=8192: kv_cache_gib=2.83 ... | serve <args>"). From the golden
# transcripts (tests/golden/lessons/R/ for each release R the course is
# checked under, which test_golden_lessons keeps equal to what the lessons
# print), this checks, release by release, that:
#  1. the same example with the same flags has the same figures in every
#     lesson that runs it;
#  2. `kvlab serve <args> --vllm-version R --json` (--accounting textbook for
#     the textbook) gives those figures;
#  3. a lesson whose text names "example X" runs example X through lib.course
#     (so its figures are among the ones checked here).
set -uo pipefail
[ "${KVLAB_LESSONS:-1}" = "0" ] && { echo "built without the lesson runtime: skipping"; exit 77; }
: "${KVLAB:?set KVLAB to the kvlab binary}"
: "${KVLAB_SOURCE_DIR:?set KVLAB_SOURCE_DIR}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
total=0
for rel in $(grep -vE '^(#|$)' "$KVLAB_SOURCE_DIR/tests/golden/lessons/RELEASES"); do
golden="$KVLAB_SOURCE_DIR/tests/golden/lessons/$rel"
if [ "$rel" = textbook ]; then relargs="--accounting textbook"; else relargs="--vllm-version $rel"; fi
echo "== $rel"

# "lesson<TAB>key<TAB>figures<TAB>serve args" for every note
for f in "$golden"/*.txt; do
    n=$(basename "$f" .txt)
    grep -E '^ *\[lessons/[^]]+\] example [A-Z]' "$f" |
        sed -E 's/^ *\[lessons\/[^]]+\] //' |
        awk -v n="$n" '{
            split($0, part, " \\| serve ")
            i = index(part[1], ": ")
            printf "%s\t%s\t%s\t%s\n", n, substr(part[1], 1, i - 1), substr(part[1], i + 2), part[2]
        }'
done >"$tmp/notes"
count=$(wc -l <"$tmp/notes")
if [ "$count" -lt 10 ]; then
    echo "FAIL only $count example notes in the golden transcripts (lib.course course.note prints them)"
    exit 1
fi

# 1. one key, one set of figures
while IFS=$'\t' read -r key; do
    variants=$(awk -F'\t' -v k="$key" '$2 == k { print $3 }' "$tmp/notes" | sort -u | wc -l)
    if [ "$variants" -ne 1 ]; then
        echo "FAIL '$key' has $variants different sets of figures:"
        awk -F'\t' -v k="$key" '$2 == k { print "      lesson " $1 ": " $3 }' "$tmp/notes" | sort -u
        fail=1
    else
        echo "ok    $key: the same in lessons $(awk -F'\t' -v k="$key" '$2 == k { print $1 }' "$tmp/notes" | sort -u | tr '\n' ' ')"
    fi
done < <(cut -f2 "$tmp/notes" | sort -u)

# 2. kvlab serve gives them: each figure from the JSON's exact fields,
# formatted the way the note formats it
while IFS=$'\t' read -r key figs args; do
    [ -n "$args" ] || { echo "skip  $key: a lab-only flag, kvlab serve cannot run it"; continue; }
    # shellcheck disable=SC2086 # the arguments are words
    json=$("$KVLAB" serve $args $relargs --json 2>&1)
    mismatch=$(awk -v figs="$figs" '
        function val(name,   re, s) {
            re = "\"" name "\":[[:space:]]*"
            if (match(json, re "(-?[0-9.eE+]+|true|false|\"[^\"]*\"|null)")) {
                s = substr(json, RSTART, RLENGTH); sub(re, "", s); gsub(/"/, "", s); return s
            }
            return "?"
        }
        { json = json $0 }
        END {
            n = split(figs, kv, " ")
            for (i = 1; i <= n; i++) {
                split(kv[i], a, "="); name = a[1]; want = a[2]
                if (name ~ /_gib$/) {
                    b = val(substr(name, 1, length(name) - 4) "_bytes")
                    got = (b == "?" || b == "null") ? "-" : sprintf("%.2f", b / 1073741824)
                    ok = (got == want) || (got != "-" && want != "-" && (got - want < 0.0051 && want - got < 0.0051))
                } else if (name == "max_concurrency") {
                    got = val(name); ok = (got - want < 0.0051 && want - got < 0.0051)
                } else if (name == "starts") {
                    got = val(name); ok = (got == want)
                } else if (name == "error_kind") {
                    got = val(name); if (got == "" || got == "null") got = "-"; ok = (got == want)
                } else {
                    got = val(name); if (got == "null" || got == "?") got = 0
                    ok = (sprintf("%d", got) == want)
                }
                if (!ok) printf "%s: lesson %s, kvlab serve %s; ", name, want, got
            }
        }' <<<"$json")
    if [ -n "$mismatch" ]; then
        echo "FAIL  $key: kvlab serve $args $relargs disagrees: $mismatch"
        fail=1
    else
        echo "ok    $key: kvlab serve agrees"
    fi
done < <(awk -F'\t' '!seen[$2]++ { print $2 "\t" $3 "\t" $4 }' "$tmp/notes")

# 3. a page that names an example belongs to a lesson that notes it
for f in "$golden"/*.txt; do
    n=$(basename "$f" .txt)
    for x in A B C; do
        # narration lines (not the check's own indented lines) naming the example
        if grep -vE '^ ' "$f" | grep -qiE "\\bexample $x\\b"; then
            if ! awk -F'\t' -v n="$n" -v x="$x" '$1 == n && $2 ~ ("^example " x "( |$)") { f = 1 } END { exit !f }' "$tmp/notes"; then
                echo "FAIL  lesson $n names example $x but never runs it through lib.course (course.start/course.note)"
                fail=1
            fi
        fi
    done
done
total=$((total + count))
done
[ "$fail" = 0 ] && echo "all $total example notes agree, with each other and with kvlab serve, release by release"
exit $fail

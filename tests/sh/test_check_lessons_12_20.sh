#!/usr/bin/env bash
# kvlab check 12..20: chapters 4 to 7 (without the playground) run headless to
# their end. Every question must refuse its wrong answers (the lesson's own,
# 10x the answer and every known near-miss) and accept the scripted one; every
# goal must hold only after its scripted flag changes. The lessons also stop
# with an error when the engine contradicts what they teach (slabs not
# collapsing, paged waste of a block or more, prefix caching not paying, no
# preemption, scenarios not separating), so a PASS is also that claim holding.
set -euo pipefail
[ "${KVLAB_LESSONS:-1}" = "0" ] && exit 77
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
out=$(XDG_STATE_HOME="$state" KVLAB_LESSONS_DIR="$KVLAB_SOURCE_DIR/lessons" \
      "$KVLAB" check 12 13 14 15 16 17 18 19 20) || { echo "$out"; exit 1; }
echo "$out"
for n in 12 13 14 15 16 17 18 19 20; do
    grep -q "^PASS lesson $n " <<<"$out" || { echo "FAIL: lesson $n did not pass"; exit 1; }
    # every lesson asks at least one question, and kvlab check tried wrong answers on it
    block=$(awk -v n="$n" '$0 ~ "^lesson "n":" {on=1; next} /^lesson [0-9]+:/ {on=0} on' <<<"$out")
    grep -q "refused" <<<"$block" || { echo "FAIL: lesson $n refused no wrong answer"; exit 1; }
done
grep -q 'kvlab check: 9 passed, 0 failed' <<<"$out"
[ ! -e "$state/kvlab/progress.json" ]
echo PASS

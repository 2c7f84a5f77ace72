#!/usr/bin/env bash
# The 21 lessons' transcripts (kvlab check -v N) equal tests/golden/lessons/:
# a figure, a text or a checked answer that changes shows as a diff here.
# scripts/golden-lessons.sh rewrites them after an intended change.
# ctest runs it once per release (test_golden_lessons_R, GOLDEN_RELEASE=R);
# without GOLDEN_RELEASE it compares every release of RELEASES.
set -uo pipefail
[ "${KVLAB_LESSONS:-1}" = "0" ] && exit 77
rel=()
[ -n "${GOLDEN_RELEASE:-}" ] && rel=(--release "$GOLDEN_RELEASE")
exec bash "$KVLAB_SOURCE_DIR/scripts/golden-lessons.sh" --check "${rel[@]}" "$KVLAB"

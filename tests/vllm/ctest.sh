#!/usr/bin/env bash
# ctest entry of the differential test (tests/vllm/diff.sh): opt in with
# KVLAB_VLLM_DIFF=1 once tests/vllm/setup.sh has made a venv; otherwise it is
# reported as skipped (exit 77), so it is never in scripts/test.sh's path.
# KVLAB_VLLM_MATRIX=full runs the whole matrix (tens of minutes); quick is four configs.
if [ "${KVLAB_VLLM_DIFF:-0}" != 1 ]; then
    echo "vllm_diff: skipped (set KVLAB_VLLM_DIFF=1 after tests/vllm/setup.sh 0.11.0 0.33.0)"
    exit 77
fi
export KVLAB_VLLM_MATRIX=${KVLAB_VLLM_MATRIX:-quick}
exec bash "$(dirname "$0")/diff.sh" "$@"

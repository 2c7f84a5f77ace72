#!/usr/bin/env bash
# Create (once) a cached virtual environment with a pinned vLLM release from
# PyPI, for the differential test (tests/vllm/diff.sh). Not part of
# scripts/test.sh: vLLM with torch is several GB.
#
#   tests/vllm/setup.sh 0.33.0 [0.11.0 ...]
#
# Each release goes to $KVLAB_VLLM_CACHE/<release>/ (default
# ~/.cache/kvlab-vllm/<release>/). Torch comes from the PyTorch CPU index when
# that answers (smaller), else from PyPI like everything else.
set -euo pipefail
root="${KVLAB_VLLM_CACHE:-$HOME/.cache/kvlab-vllm}"
py="${PYTHON:-python3}"
[ $# -ge 1 ] || { echo "usage: $0 RELEASE [RELEASE ...]  (e.g. 0.33.0)" >&2; exit 2; }
cpu_index=https://download.pytorch.org/whl/cpu
for rel in "$@"; do
    case "$rel" in
        [0-9]*.[0-9]*) ;;
        *) echo "setup: '$rel' is not a release number like 0.33.0" >&2; exit 2 ;;
    esac
    venv="$root/$rel"
    if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import vllm.v1.core.sched.scheduler" 2>/dev/null; then
        echo "setup: vLLM $rel ready in $venv"
        continue
    fi
    mkdir -p "$root"
    "$py" -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    # the torch version this release pins, from its wheel's metadata
    extra=()
    if curl -fsS -m 5 -o /dev/null "$cpu_index/torch/" 2>/dev/null; then
        extra=(--extra-index-url "$cpu_index")
    fi
    "$venv/bin/pip" install -q "${extra[@]}" "vllm==$rel"
    VLLM_TARGET_DEVICE=cpu "$venv/bin/python" -c "import vllm.v1.core.sched.scheduler" \
        || { echo "setup: vLLM $rel installed but its scheduler does not import" >&2; exit 1; }
    echo "setup: vLLM $rel ready in $venv"
done

#!/usr/bin/env bash
# The optional half of the differential test: the configurations of
# diff.sh replayed on vLLM's own LRUOffloadingManager (vllm_replay.py) in a
# venv from tests/vllm/setup.sh of a release that has it (0.11.0 - 0.18.x,
# default 0.11.0: KVLAB_VLLM_OFFLOAD_RELEASE), against kvlab's tier. Without
# the venv, KVLAB_VLLM_SRC=DIR holding DIR/<release>/vllm/ (a wheel's
# unpacked .py files) runs the release's own lru_manager.py, abstract.py,
# backend.py, mediums.py and backends/cpu.py as they are, with the two
# imports they need from torch-land stubbed (BlockHash as bytes, numpy).
# From 0.31.0 (KVLAB_VLLM_OFFLOAD_RELEASE=0.31.0 ... 0.33.0) the release's
# own cpu/manager.py and cpu/policies/lru.py from KVLAB_VLLM_SRC replay the
# calls of that era's rules (vllm_ranked_replay.py; torch, numpy and the
# rest of vLLM stubbed). Skipped (exit 77) when neither is there.
set -u
: "${OFFLOAD_REPLAY:?set OFFLOAD_REPLAY to the offload_replay binary}"
rel=${KVLAB_VLLM_OFFLOAD_RELEASE:-0.11.0}
venv="${KVLAB_VLLM_CACHE:-$HOME/.cache/kvlab-vllm}/$rel"
py="$venv/bin/python"
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PYTHONPATH=
# the release's rules (gen_ops.py RULES): 0.18 keeps an offer's own keys,
# 0.31 ranks per request, 0.33 adds provisional ranks
rules=$(python3 -c "import sys; v=tuple(int(x) for x in sys.argv[1].split('.')[:2])
print(3 if v >= (0, 33) else 2 if v >= (0, 31) else int(v >= (0, 18)))" "$rel")
ranked=0
if [ "$rules" -ge 2 ]; then
  if [ -z "${KVLAB_VLLM_SRC:-}" ] || [ ! -f "$KVLAB_VLLM_SRC/$rel/vllm/v1/kv_offload/cpu/policies/lru.py" ]; then
    echo "offload_vllm: skipped (KVLAB_VLLM_SRC=DIR with $rel/vllm/ for vLLM $rel's own manager)"
    exit 77
  fi
  ranked=1
  py=python3
  echo "offload_vllm: vLLM $rel's own cpu/manager.py and cpu/policies/lru.py from $KVLAB_VLLM_SRC/$rel (stubs for the rest)"
elif [ ! -x "$py" ] || ! VLLM_TARGET_DEVICE=cpu "$py" -c "import vllm.v1.kv_offload.lru_manager" 2>/dev/null; then
  src="${KVLAB_VLLM_SRC:-}/$rel/vllm"
  if [ -z "${KVLAB_VLLM_SRC:-}" ] || [ ! -f "$src/v1/kv_offload/lru_manager.py" ] || ! command -v python3 >/dev/null; then
    echo "offload_vllm: skipped (no vLLM $rel venv: tests/vllm/setup.sh $rel; or KVLAB_VLLM_SRC=DIR with $rel/vllm/)"
    exit 77
  fi
  st="$tmp/src"
  mkdir -p "$st/vllm/v1/core" "$st/vllm/v1/kv_offload/backends" "$st/numpy"
  touch "$st/vllm/__init__.py" "$st/vllm/v1/__init__.py" "$st/vllm/v1/core/__init__.py" \
        "$st/vllm/v1/kv_offload/__init__.py" "$st/vllm/v1/kv_offload/backends/__init__.py"
  printf 'from typing import NewType\nBlockHash = NewType("BlockHash", bytes)\n' >"$st/vllm/v1/core/kv_cache_utils.py"
  printf 'ndarray = object\nint64 = int\n\ndef array(*a, **k):\n    return a[0] if a else None\n' >"$st/numpy/__init__.py"
  for f in lru_manager abstract backend mediums; do cp "$src/v1/kv_offload/$f.py" "$st/vllm/v1/kv_offload/"; done
  cp "$src/v1/kv_offload/backends/cpu.py" "$st/vllm/v1/kv_offload/backends/"
  py=python3
  export PYTHONPATH="$st"
  echo "offload_vllm: vLLM $rel's own manager source from $src (torch-free stubs)"
fi
fail=0
# the configurations of diff.sh
mapfile -t CONFIGS < <(sed -n 's/^  "\([0-9 ]*\)".*/\1/p' "$here/diff.sh")
CONFIGS=("${CONFIGS[@]/#/$rules }")
for c in "${CONFIGS[@]}"; do
  # shellcheck disable=SC2086
  python3 "$here/gen_ops.py" $c >"$tmp/ops" || { echo "FAIL: gen_ops $c"; fail=1; continue; }
  if [ $ranked = 1 ]; then
    python3 "$here/vllm_ranked_replay.py" "$KVLAB_VLLM_SRC/$rel" <"$tmp/ops" >"$tmp/vllm" 2>"$tmp/err"
  else
    VLLM_TARGET_DEVICE=cpu "$py" "$here/vllm_replay.py" <"$tmp/ops" >"$tmp/vllm" 2>"$tmp/err"
  fi ||
    { echo "FAIL: vLLM $rel replay $c: $(tail -1 "$tmp/err")"; fail=1; continue; }
  "$OFFLOAD_REPLAY" <"$tmp/ops" >"$tmp/kvlab"
  if cmp -s "$tmp/vllm" "$tmp/kvlab"; then
    echo "ok: vLLM $rel, config '$c': $(grep -vc '^C' "$tmp/ops") calls agree"
  else
    echo "FAIL: vLLM $rel, config '$c': $(cmp "$tmp/vllm" "$tmp/kvlab")"
    fail=1
  fi
done
[ ${#CONFIGS[@]} -ge 10 ] || { echo "FAIL: only ${#CONFIGS[@]} configurations"; fail=1; }
exit $fail

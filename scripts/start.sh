#!/usr/bin/env bash
# Quick start: install what is missing, build, open the lesson app.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j"$(nproc)" >/dev/null
exec build/kvlab "$@"

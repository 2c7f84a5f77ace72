#!/usr/bin/env bash
# The release accounting against the real start-up logs of
# tests/vectors/real-logs.json (bench/fidelity.py --check): fails if the
# median |KV error| goes above 1.5% or a start/fail verdict changes.
# Skipped (77) where python3 is absent.
set -u
: "${KVLAB:?set KVLAB to the kvlab binary}"
: "${KVLAB_SOURCE_DIR:?set KVLAB_SOURCE_DIR}"
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skipped"; exit 77; }
export KVLAB_DATA_DIR="$KVLAB_SOURCE_DIR"
python3 "$KVLAB_SOURCE_DIR/bench/fidelity.py" --kvlab "$KVLAB" --check

#!/usr/bin/env bash
# The README's kvlab explain / fit / serve --vs examples are the commands'
# real output with this build (scripts/readme-outputs.py --write rewrites
# them after an intended change).
set -u
: "${KVLAB:?set KVLAB to the kvlab binary}"
: "${KVLAB_SOURCE_DIR:?set KVLAB_SOURCE_DIR}"
KVLAB="$KVLAB" python3 "$KVLAB_SOURCE_DIR/scripts/readme-outputs.py"

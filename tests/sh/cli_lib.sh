# Shared preamble of the shell tests that drive the kvlab CLI (serve,
# simulate, fit, --json): sourced by tests/sh/test_*.sh as
#   . "$(dirname "$0")/cli_lib.sh"
# It sets what each of them used to set by hand:
#   K, KVLAB       the binary (ctest sets KVLAB; a clear message if not)
#   KVLAB_DATA_DIR the source tree's data, when KVLAB_SOURCE_DIR is set
#   L8, M          the model most tests plan (Llama-3.1-8B-Instruct)
#   tmp            a private temporary folder, removed on exit
#   fail=0         for tests that collect failures and `exit $fail` at the end
# and the helpers below. No pipefail and no -e: the tests check exit codes
# themselves (several expect 1 or 2).
set -u
: "${KVLAB:?KVLAB must point at the kvlab binary}"
K=$KVLAB
if [ -n "${KVLAB_SOURCE_DIR:-}" ]; then
  export KVLAB_DATA_DIR="$KVLAB_SOURCE_DIR"
fi
L8=meta-llama/Llama-3.1-8B-Instruct
M=$L8
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# fail MSG: print "FAIL: MSG" on stderr and stop the test (exit 1).
# (The variable $fail and this function live side by side, as bash allows.)
fail() { echo "FAIL: $*" >&2; exit 1; }

# cli_need_python: skip the test (exit 77, ctest's SKIP_RETURN_CODE) without python3.
cli_need_python() {
  command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
}

# num KEY FILE: the number after "KEY": on a line of pretty-printed JSON
# (the first such line), empty if none.
num() { sed -n "s/^[[:space:]]*\"$1\":[[:space:]]*\([-0-9.eE+]*\),\{0,1\}$/\1/p" "$2" | head -1; }

# field FILE KEY: the top-level KEY of the JSON object in FILE, as Python prints it.
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# jget FILE A.B.C: a nested field of the JSON object in FILE (keys joined by
# dots), as Python prints it.
jget() { python3 -c 'import json,sys
o=json.load(open(sys.argv[1]))
for p in sys.argv[2].split("."):
    o=o[p]
print(o)' "$1" "$2"; }

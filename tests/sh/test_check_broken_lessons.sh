#!/usr/bin/env bash
# Broken lesson scripts give a clear message with file:line and never crash
# kvlab: a syntax error, a runtime error, an undeclared global, an endless
# loop, a question whose check accepts a wrong answer, a goal with no script,
# a require outside lessons/lib, a lesson file missing from disk, and a
# lab.say format that does not match its arguments. Also
# --lessons DIR and KVLAB_LESSONS_DIR both select the folder.
set -uo pipefail
[ "${KVLAB_LESSONS:-1}" = "0" ] && exit 77
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/lessons/lib"
L="$dir/lessons"
cat > "$L/manifest.json" <<'JSON'
{"format_version": 1,
 "chapters": [{"number": 1, "title": "Broken"}],
 "lessons": [
  {"number": 1, "chapter": 1, "file": "01-syntax.lua", "title": "Syntax error"},
  {"number": 2, "chapter": 1, "file": "02-runtime.lua", "title": "Runtime error"},
  {"number": 3, "chapter": 1, "file": "03-global.lua", "title": "Undeclared global"},
  {"number": 4, "chapter": 1, "file": "04-loop.lua", "title": "Endless loop"},
  {"number": 5, "chapter": 1, "file": "05-lax.lua", "title": "Lax question"},
  {"number": 6, "chapter": 1, "file": "06-goal.lua", "title": "Goal without script"},
  {"number": 7, "chapter": 1, "file": "07-require.lua", "title": "Bad require"},
  {"number": 8, "chapter": 1, "file": "08-missing.lua", "title": "Missing"},
  {"number": 9, "chapter": 1, "file": "09-good.lua", "title": "A good one"},
  {"number": 10, "chapter": 1, "file": "10-format.lua", "title": "Bad format"}
 ]}
JSON
printf 'return {\n  id = 1,\n  run = function(lab)\n    lab.say("hi"\n  end,\n}\n' > "$L/01-syntax.lua"
printf 'return {\n  id = 2,\n  run = function(lab)\n    lab.pause()\n    local t = nil\n    lab.say(t.x)\n  end,\n}\n' > "$L/02-runtime.lua"
printf 'return {\n  id = 3,\n  run = function(lab)\n    total = 3\n  end,\n}\n' > "$L/03-global.lua"
printf 'return {\n  id = 4,\n  run = function(lab)\n    while true do end\n  end,\n}\n' > "$L/04-loop.lua"
printf 'return {\n  id = 5,\n  run = function(lab)\n    lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb", ["max-model-len"] = 8192 }\n    lab.ask{ prompt = "KV heads?", answer = 8, tolerance = 5, expect = "model.kv_heads" }\n  end,\n}\n' > "$L/05-lax.lua"
printf 'return {\n  id = 6,\n  flags = { "max-model-len" },\n  run = function(lab)\n    lab.goal{ text = "x", check = function() return false end }\n  end,\n}\n' > "$L/06-goal.lua"
printf 'return {\n  id = 7,\n  run = function(lab)\n    local io = require("io")\n  end,\n}\n' > "$L/07-require.lua"
cat > "$L/lib/two.lua" <<'LUA'
return { value = 2 }
LUA
printf 'local two = require("lib.two")\nreturn {\n  id = 9,\n  run = function(lab)\n    lab.say("two is %%d", two.value)\n    lab.pause()\n    lab.start{ model = "meta-llama/Llama-3.1-8B-Instruct", gpu = "h100-80gb", ["max-model-len"] = 8192 }\n    lab.ask{ prompt = "KV heads / 4?", answer = 2 * two.value, given = { two = two.value }, expect = "model.kv_heads / two", script = "4", wrong = { "3" } }\n    lab.ask{ prompt = "pick", choices = { "a", "b" }, correct = 2 }\n  end,\n}\n' > "$L/09-good.lua"

printf 'return {\n  id = 10,\n  run = function(lab)\n    lab.say("%%d blocks", nil)\n  end,\n}\n' > "$L/10-format.lua"

fail=0
expect() { # expect N rc pattern
  local n=$1 want=$2 pat=$3 out rc
  out=$("$KVLAB" check --lessons "$L" "$n" 2>&1); rc=$?
  echo "--- lesson $n (exit $rc)"; echo "$out"
  if [ "$rc" -ne "$want" ]; then echo "FAIL: lesson $n exit $rc, wanted $want"; fail=1; fi
  if ! grep -qE -- "$pat" <<<"$out"; then echo "FAIL: lesson $n output lacks /$pat/"; fail=1; fi
}
expect 1 1 "lessons/01-syntax.lua:5: .*expected"
expect 2 1 "lessons/02-runtime.lua:6: attempt to index a nil value"
expect 2 1 "stack traceback"
expect 3 1 "lessons/03-global.lua:4: assignment to undeclared global 'total'"
expect 4 1 "lessons/04-loop.lua:4: the lesson ran too long without waiting"
expect 5 1 "accepted the wrong answer"
expect 6 1 "has no script"
expect 7 1 "lessons/07-require.lua:4: require\(\"io\"\): lessons can only load their helpers"
expect 8 1 "08-missing.lua is missing"
expect 9 0 "^PASS lesson 9 "
expect 10 1 "lessons/10-format.lua:4: lab.say: bad argument #2"
# The environment variable selects the folder too.
out=$(KVLAB_LESSONS_DIR="$L" "$KVLAB" check 9 2>&1) || { echo "FAIL: KVLAB_LESSONS_DIR"; fail=1; }
grep -q "^PASS lesson 9 " <<<"$out" || { echo "FAIL: KVLAB_LESSONS_DIR output: $out"; fail=1; }
# A manifest that is not JSON is one clear line and exit 2.
mkdir -p "$dir/bad" && echo '{ nope' > "$dir/bad/manifest.json"
out=$("$KVLAB" check --lessons "$dir/bad" 2>&1); rc=$?
echo "$out"
[ "$rc" -eq 2 ] && grep -q "manifest.json is not valid JSON" <<<"$out" || { echo "FAIL: bad manifest"; fail=1; }
# A lesson file the manifest does not list fails the whole-course check.
cp "$L/09-good.lua" "$L/11-stray.lua"
out=$("$KVLAB" check --lessons "$L" 2>&1); rc=$?
echo "$out" | tail -3
[ "$rc" -eq 1 ] && grep -q "11-stray.lua is not listed in manifest.json" <<<"$out" || { echo "FAIL: stray file"; fail=1; }
rm "$L/11-stray.lua"
# Manifest entries out of order or misnamed: one line saying what to fix, exit 2.
mkdir -p "$dir/m1" "$dir/m2"
echo '{"format_version": 1, "chapters": [{"number": 1, "title": "x"}], "lessons": [{"number": 2, "chapter": 1, "file": "02-a.lua", "title": "a"}]}' > "$dir/m1/manifest.json"
echo '{"format_version": 1, "chapters": [{"number": 1, "title": "x"}], "lessons": [{"number": 1, "chapter": 1, "file": "1-A.lua", "title": "a"}]}' > "$dir/m2/manifest.json"
out=$("$KVLAB" check --lessons "$dir/m1" 2>&1); rc=$?
echo "$out"
[ "$rc" -eq 2 ] && grep -q 'must have "number": 1' <<<"$out" || { echo "FAIL: manifest order"; fail=1; }
out=$("$KVLAB" check --lessons "$dir/m2" 2>&1); rc=$?
echo "$out"
[ "$rc" -eq 2 ] && grep -q 'must be named "01-slug.lua"' <<<"$out" || { echo "FAIL: manifest file name"; fail=1; }
exit $fail

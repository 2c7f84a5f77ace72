#!/usr/bin/env bash
# Every error_kind the engine can give is named where users read it: the
# plan's names (kv_plan_error_name, engine/kv_plan.c) in lessons/API.md
# (lab.plan()), docs/json-schema.md (serve --json) and the header comment
# of engine/kv_plan.h; the log reader's names (kv_logread_error_name,
# engine/kv_logread.c) in docs/explain.md. A kind added to the code and not
# to these lists fails here.
set -uo pipefail
root=${KVLAB_SOURCE_DIR:?}
fail=0
plan=$(sed -n '/^const char \*kv_plan_error_name/,/^}/p' "$root/engine/kv_plan.c" | grep -oE 'return "[a-z_0-9]+"' |
    sed -E 's/return "(.*)"/\1/')
read_=$(sed -n '/^const char \*kv_logread_error_name/,/^}/p' "$root/engine/kv_logread.c" | grep -oE '"[a-z_0-9]+"' |
    tr -d '"')
[ "$(wc -w <<<"$plan")" -ge 8 ] || { echo "FAIL: could not read kv_plan_error_name's names"; exit 1; }
[ "$(wc -w <<<"$read_")" -ge 8 ] || { echo "FAIL: could not read kv_logread_error_name's names"; exit 1; }
# The sentence or table row that lists them, one line each.
api=$(grep -F '`error_kind` (' "$root/lessons/API.md")
schema=$(grep -E '^\| `error_kind` \|' "$root/docs/json-schema.md")
header=$(sed -n '/Short machine names for kv_plan_error/,/\*\//p' "$root/engine/kv_plan.h")
explain=$(sed -n '/^`error_kind` is one of/,/^$/p' "$root/docs/explain.md")
for k in $plan; do
    grep -qF "\`\"$k\"\`" <<<"$api" || { echo "FAIL: lessons/API.md's lab.plan() error_kind list lacks \"$k\""; fail=1; }
    grep -qF "\`$k\`" <<<"$schema" || { echo "FAIL: docs/json-schema.md's error_kind row lacks $k"; fail=1; }
    grep -qF "\"$k\"" <<<"$header" || { echo "FAIL: engine/kv_plan.h's comment on kv_plan_error_name lacks \"$k\""; fail=1; }
done
for k in $read_; do
    grep -qF "\`$k\`" <<<"$explain" || { echo "FAIL: docs/explain.md's error_kind list lacks $k"; fail=1; }
done
[ "$fail" -eq 0 ] && echo "PASS ($(wc -w <<<"$plan") plan kinds, $(wc -w <<<"$read_") log kinds documented)"
exit "$fail"

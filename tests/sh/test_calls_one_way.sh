#!/usr/bin/env bash
# Calls go one way (docs/DESIGN.md): the app's views (tui/app/ui_*) include
# no app header and call nothing the app's modules (tui/app/app_*) define,
# of the engine (kv_*) and the lesson runtime (lsn_*) they use only the pure
# helpers listed in view_pure below (no runner, engine or history query: the
# app reads those into the view model, tui/app/ui_model.h),
# and in the lesson runtime nothing but lsn_check.c calls what lsn_check.c
# defines (the runner hands `kvlab check` its handlers instead). Read from
# the object files kvlab was linked from (nm), so a call through a macro or
# a name without the app_ prefix is caught too.
set -u
K=${KVLAB:?KVLAB not set}
src=${KVLAB_SOURCE_DIR:?KVLAB_SOURCE_DIR not set}
b=$(dirname "$K")
command -v nm >/dev/null || { echo "SKIP: no nm"; exit 77; }
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# 1. no view includes an app_* header
for f in "$src"/tui/app/ui_*.[ch]; do
  grep -nE '^\s*#\s*include\s*"(app|app_[a-z_]+)\.h"' "$f" | sed "s|^|$(basename "$f"):|" | while read -r l; do echo "FAIL: view includes $l"; done
  grep -qE '^\s*#\s*include\s*"(app|app_[a-z_]+)\.h"' "$f" && fail=1
done

# 2. no view object calls a symbol an app_* object defines
if [ "${KVLAB_TUI:-1}" != "0" ] && [ "${KVLAB_TUI:-}" != "OFF" ]; then
  app=$b/CMakeFiles/kvlab.dir/tui/app
  ls "$app"/app_main.c.o "$app"/ui_chrome.c.o >/dev/null 2>&1 || bad "no app objects under $app"
  defs=$(nm --defined-only "$app"/app_*.o 2>/dev/null | awk 'NF == 3 && $2 ~ /[TDBR]/ {print $3}' | sort -u)
  [ -n "$defs" ] || bad "nm found no symbols in the app_* objects"
  views=0
  for o in "$app"/ui_*.o; do
    views=$((views + 1))
    hits=$(nm -u "$o" | awk '{print $NF}' | grep -Fx -f <(printf '%s\n' "$defs") || true)
    [ -z "$hits" ] || bad "$(basename "$o" .c.o) calls into the app: $(echo $hits)"
  done
  echo "views checked: $views against $(printf '%s\n' "$defs" | wc -l) app symbols"

  # 2b. of kv_* and lsn_*, a view uses only these: formatting, lookups in a
  # kv_frame it was handed, tables of names; none reads a runner, an engine
  # or a history
  view_pure="kv_fmt_thousands kv_frame_find_req kv_frame_table kv_frame_block kv_frame_block_owners
             kv_release_metrics_of lsn_server_log_phase lsn_view_names"
  nq=0
  for o in "$app"/ui_*.o; do
    used=$(nm -u "$o" | awk '{print $NF}' | grep -E '^(kv|lsn)_' || true)
    nq=$((nq + $(printf '%s' "$used" | grep -c . || true)))
    hits=$(printf '%s\n' $used | grep -vFx -f <(printf '%s\n' $view_pure) | grep . || true)
    [ -z "$hits" ] || bad "$(basename "$o" .c.o) queries the engine or the lesson runtime: $(echo $hits)"
  done
  echo "views use $nq kv_*/lsn_* symbols, all in the pure list"
fi

# 3. the lesson runtime: only lsn_check.o uses what lsn_check.o defines
if [ "${KVLAB_LESSONS:-1}" != "0" ] && [ "${KVLAB_LESSONS:-}" != "OFF" ]; then
  host=$b/CMakeFiles/kvlesson.dir/lessons/host
  [ -f "$host/lsn_check.c.o" ] || bad "no $host/lsn_check.c.o"
  cdefs=$(nm --defined-only "$host/lsn_check.c.o" 2>/dev/null | awk 'NF == 3 && $2 ~ /[TDBR]/ {print $3}' | sort -u)
  [ -n "$cdefs" ] || bad "nm found no symbols in lsn_check.c.o"
  for o in "$host"/*.o; do
    [ "$o" = "$host/lsn_check.c.o" ] && continue
    hits=$(nm -u "$o" | awk '{print $NF}' | grep -Fx -f <(printf '%s\n' "$cdefs") || true)
    [ -z "$hits" ] || bad "$(basename "$o" .c.o) calls into lsn_check.c: $(echo $hits)"
  done
  grep -nE '#\s*include\s*"lsn_check' "$src"/lessons/host/*.[ch] && bad "a runtime file includes an lsn_check header"
fi
[ $fail -eq 0 ] && echo "PASS: calls go one way"
exit $fail

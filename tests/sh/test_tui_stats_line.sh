#!/usr/bin/env bash
# vLLM's periodic stats line in the log view comes every logging interval of
# the learner's time (tui/app/app_stats.c), in the release's words, also on a
# page that runs the engine slowly: lesson 21's first page serves at about a
# tenth of real time at 80x24, so a line per 10 s of engine time (the old
# way) came after about 100 s of watching. Here it must show while the
# metrics view's engine clock is still short of one interval (10 s in V1),
# under the newest release ("Engine 000: Avg prompt throughput ... GPU KV
# cache usage") and under a V0 release (0.6.4: 5 s, "Swapped: 0 reqs,
# Pending:").
. "$(dirname "$0")/tui_lib.sh"

# the engine seconds the metrics view's title says it keeps ("last N steps, T s")
engine_s() { tui_screen | grep -oE 'last [0-9]+ steps, [0-9.]+ s' | head -1 | grep -oE '[0-9.]+ s$' | cut -d' ' -f1; }

# the log view's text, its rows joined without spaces (the box right of the
# text view's, from its title on)
log_text() {
    tui_screen | awk '/start-up log/ {on = 1; next} on {print}' |
        sed -e 's/^.*\(||\|││\)//' -e 's/[|│]$//' | tr -d ' \n'
}

check_release() { # check_release COLS ROWS VERSION WORD INTERVAL
    local cols=$1 rows=$2 v=$3 word=$4 iv=$5 t
    TUI_ACCOUNTING='' tui_start "$cols" "$rows" NO_COLOR=1 -- --lesson 21 --ascii --vllm-version "$v"
    tui_wait "Lesson 21/" 10
    tui_wait "metrics" 20
    # wide: Tab to the log (memory, pool, flags, metrics, log) so it has half the column
    if [ -n "$word" ]; then
        local k
        for k in 1 2 3 4 5; do tui_press Tab || fail "$v: Tab $k did not move the focus"; done
    fi
    local end=$((SECONDS + 20 * ${TUI_TIMEOUT_SCALE:-3}))
    until log_text | grep -qF "GPUKVcacheusage:"; do
        [ $SECONDS -lt $end ] || fail "$v: no stats line in the log view"
        sleep 0.2
    done
    t=$(engine_s)
    echo "$v at ${cols}x${rows}: stats line shown at engine time ${t:-?} s (interval $iv s)"
    [ -n "$t" ] || fail "$v: the metrics view's engine time was not found"
    awk -v t="$t" -v iv="$iv" 'BEGIN { exit !(t < iv) }' ||
        echo "note: $v: the engine reached ${t} s before the line showed (a fast machine); not a failure"
    if [ -n "$word" ]; then
        log_text | grep -qF "$word" || fail "$v: the stats line is not in the release's words ($word)"
    fi
    tui_quit_clean
    tui_stop
    rm -rf "${TUI_STATE:?}"/*
}

# 80x24: the line's end shows in the log's last rows, in time
check_release 80 24 0.33.0 "" 10
# wide: the line whole, in each release's words
check_release 140 45 0.33.0 "Engine000:Avgpromptthroughput:" 10
check_release 140 45 0.6.4 "Swapped:0reqs,Pending:" 5
echo "PASS"

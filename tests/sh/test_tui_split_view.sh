#!/usr/bin/env bash
# Lesson 19's split page plays the prefill/decode split in the pool view at
# 80x24 (lab.split{show = true}, tui/app/ui_split.c): the prefill pool and
# the decode pool side by side with the link between them, transfers drawn
# on the link while they cross, kv_transfer_bytes and the requests that
# crossed counting up, and at the end all 40 requests answered with the
# time to first token against one GPU. Once in colour (UTF-8) and once
# with NO_COLOR in ASCII, where the glyphs alone tell the parts apart.
. "$(dirname "$0")/tui_lib.sh"

# walk lesson 19 to its split page (the live offload page's goal and
# question answered on the way)
to_split_page() {
    tui_wait "Lesson 19/" 10
    tui_advance_until "Of the lengths in the table" 12 || fail "lesson 19's first question never came"
    tui_keys -l 512
    tui_keys Enter
    tui_wait "That's right" 10
    tui_wait "Reload the KV over PCIe" 10
    tui_keys a Enter
    tui_wait "PCIe. That" 10
    tui_advance_until "Goal: Make the second reader" 12 || fail "the live page's goal never came"
    # the flags view's first row is the lesson's one flag (tui_set_flag
    # reads the view's UTF-8 frame, so not under LC_ALL=C)
    tui_keys f
    tui_wait "kv-offloading-size selected" 10 || fail "the flags view did not open on kv-offloading-size"
    tui_keys Enter C-u
    tui_keys -l 8
    tui_keys Enter
    tui_wait "kv-offloading-size = 8" 15 || fail "--kv-offloading-size 8 was not applied"
    tui_keys Escape
    tui_wait "How many blocks did the tier load" 120 || fail "the live page's question never came"
    tui_keys -l 128
    tui_keys Enter
    tui_wait "That's right" 10
    tui_advance_until "prefill / decode split" 12 || fail "no split in the pool view"
}

# wait_all TIMEOUT_S RE...: until one screen matches every extended regex
wait_all() {
    local timeout=$(( $1 * ${TUI_TIMEOUT_SCALE:-3} )) scr re ok
    shift
    local end=$((SECONDS + timeout))
    while [ $SECONDS -le $end ]; do
        scr=$(tui_screen)
        ok=1
        for re in "$@"; do grep -qE -- "$re" <<<"$scr" || { ok=0; break; }; done
        [ $ok = 1 ] && return 0
        sleep 0.05
    done
    echo "FAIL: no screen within ${timeout}s matched: $*; screen:" >&2
    tui_screen >&2
    return 1
}

# the split as it plays, then at its end; $1: the link's line with a
# transfer on it (hline and arrow of the glyph set)
check_playing() {
    local onlink=$1
    tui_screen | grep -qE "prefill +[0-9]+%" || fail "no prefill pool label"
    tui_screen | grep -qE "decode +[0-9]+%" || fail "no decode pool label"
    tui_screen | grep -qF "rdma" && tui_screen | grep -qF "50 GB/s" || fail "the link is not named"
    # a transfer drawn on the link while the prompts cross, the bytes counting
    wait_all 30 "[1-9][0-9]* on it" "$onlink" || fail "no transfer drawn on the link"
    wait_all 30 "crossed [1-9][0-9]*/40" || fail "no request crossed"
    # the end of the run: every request answered, the bytes of 40 prompts
    tui_wait "done 40/40" 90 || fail "the split never played to its end"
    tui_screen | grep -qE "kv_transfer_bytes 20.00 GiB" || fail "kv_transfer_bytes of 40 x 4,096 tokens x 128 KiB"
    tui_screen | grep -qE "TTFT [0-9.]+ m?s \(one GPU [0-9.]+ m?s\)" || fail "no TTFT against one GPU"
    tui_screen | grep -qE "crossed 40/40" || fail "not all 40 crossed"
    tui_screen | grep -qE "0 on it" || fail "transfers left on the link at the end"
}

TUI_ACCOUNTING= tui_start 80 24 LC_ALL=C.UTF-8 -- --lesson 19
to_split_page
check_playing "(─+→|→─+)"
tui_quit_clean
tui_stop
rm -rf "$TUI_STATE"
TUI_STATE=$(mktemp -d) # a fresh start of the lesson
export XDG_STATE_HOME="$TUI_STATE"

TUI_ACCOUNTING= tui_start 80 24 LC_ALL=C NO_COLOR=1 -- --lesson 19
to_split_page
check_playing "(-+>|>-+)"
tui_screen | grep -qP "[^\x00-\x7f]" && fail "non-ASCII cells under LC_ALL=C"
tui_quit_clean
echo "PASS"

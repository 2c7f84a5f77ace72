#!/usr/bin/env bash
# Lesson 19's live page at 80x24 (vLLM 0.33): without --kv-offloading-size
# the pool view has no CPU tier row; with it, the host tier is drawn under
# the GPU pool and its caption counts the blocks stored out of HBM and the
# 128 blocks of the shared document loaded back for its second reader; the
# metrics view gives the CPU tier's own hit rate beside the GPU's.
. "$(dirname "$0")/tui_lib.sh"

TUI_ACCOUNTING= tui_start 80 24 LC_ALL=C.UTF-8 -- --lesson 19
tui_wait "Lesson 19/" 10
tui_advance_until "Of the lengths in the table" 12 || fail "lesson 19's first question never came"
tui_keys -l 512
tui_keys Enter
tui_wait "That's right" 10
tui_wait "a) Reload the KV over PCIe" 10
tui_keys a Enter
tui_wait "PCIe. That" 10
tui_advance_until "Goal: Make the second reader" 12 || fail "the live page's goal never came"
tui_screen | grep -qE "CPU tier [0-9,]+/" && fail "a CPU tier row without --kv-offloading-size"
tui_screen | grep -qF "CPU tier hit rate" && fail "a CPU tier hit rate without a tier"
tui_set_flag kv-offloading-size 8
tui_screen | grep -qE "kv-offloading-size +8 " || fail "the flags view does not show kv-offloading-size 8"

tui_wait "↑128" 90              # the document's 128 blocks came back
tui_screen | grep -qE "CPU tier [0-9,]+/4,096 ↓[0-9,]+ ↑128" || fail "no CPU tier row of 4,096 blocks (8 GiB) under the pool"
# hits by tier: the metrics view's CPU tier row, highlighted by the lesson
tui_screen | grep -qE "CPU tier hit rate +[1-9][0-9]*%" || fail "no CPU tier hit rate in the metrics view"
tui_quit_clean
echo "PASS"

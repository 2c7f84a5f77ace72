#!/usr/bin/env bash
# The differential test: kvlab's engine against vLLM's own scheduler, step by
# step, over a matrix of traces and configs (tests/vllm/README.md).
#
#   tests/vllm/diff.sh [RELEASE ...]       (default: 0.11.0 0.33.0)
#
# For each release it needs the venv that tests/vllm/setup.sh RELEASE makes
# (under $KVLAB_VLLM_CACHE, default ~/.cache/kvlab-vllm/); a release without
# one is skipped, and with none at all the script exits 77 (skipped), so it
# never blocks scripts/test.sh. KVLAB_VLLM_MATRIX=quick runs four configs
# instead of the whole matrix. For every config it runs `kvlab simulate
# --vllm-version RELEASE --steps-out`, replays the file on vLLM
# (tests/vllm/replay.py: every step compared, first difference printed) and
# times kvlab and vLLM side by side. Exit 0: every step identical everywhere;
# 1: a difference (printed); 77: nothing could run.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
K=${KVLAB:-$src/build/kvlab}
root=${KVLAB_VLLM_CACHE:-$HOME/.cache/kvlab-vllm}
M=meta-llama/Llama-3.1-8B-Instruct
[ -x "$K" ] || { echo "diff: no kvlab at $K (build first, or set KVLAB)" >&2; exit 77; }
releases=("$@")
[ ${#releases[@]} -gt 0 ] || releases=(0.11.0 0.33.0)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# name  requests  pool(blocks; 0 = the plan's)  prefix-caching  max-num-seqs  policy
full_matrix() {
    for n in 100 1000; do
        for pool in 160 0; do
            for pc in on off; do
                for seqs in 4 256; do
                    for pol in fcfs priority; do
                        echo "n$n-pool$pool-pc$pc-seqs$seqs-$pol $n $pool $pc $seqs $pol"
                    done
                done
            done
        done
    done
    for pool in 400 0; do
        for pol in fcfs priority; do
            echo "n10000-pool$pool-pcon-seqs256-$pol 10000 $pool on 256 $pol"
        done
    done
}
quick_matrix() {
    echo "n200-pool160-pcon-seqs256-fcfs 200 160 on 256 fcfs"
    echo "n200-pool160-pcon-seqs256-priority 200 160 on 256 priority"
    echo "n200-pool160-pcoff-seqs4-fcfs 200 160 off 4 fcfs"
    echo "n200-pool0-pcon-seqs4-priority 200 0 on 4 priority"
}
if [ "${KVLAB_VLLM_MATRIX:-full}" = quick ]; then quick_matrix >"$tmp/matrix"; else full_matrix >"$tmp/matrix"; fi

ran=0 bad=0
for rel in "${releases[@]}"; do
    py="$root/$rel/bin/python"
    if [ ! -x "$py" ]; then
        echo "diff: vLLM $rel: no venv in $root/$rel (run tests/vllm/setup.sh $rel); skipped"
        continue
    fi
    vflag=(--vllm-version "$rel")
    if ! "$K" simulate $M "${vflag[@]}" --trace gen:requests=1 >/dev/null 2>"$tmp/err"; then
        if [ "$rel" = 0.33.0 ] && grep -q "unknown" "$tmp/err"; then
            vflag=() # a kvlab without --vllm-version runs the newest release's rules
        else
            echo "diff: vLLM $rel: kvlab simulate --vllm-version $rel fails: $(head -1 "$tmp/err"); skipped"
            continue
        fi
    fi
    files=()
    : >"$tmp/kvlab-times"
    while read -r name n pool pc seqs pol; do
        gen="gen:requests=$n,rate=200,prompt=256,prompt_sigma=0.7,output=64,output_sigma=0.7,max_prompt=1800,max_output=240,shared=0.4,prefix=256,prefixes=4,priorities=4,seed=${#name}"
        args=(simulate $M "${vflag[@]}" --gpu h100-80gb --max-model-len 2048 --max-num-batched-tokens 1024
              --max-num-seqs "$seqs" --scheduling-policy "$pol" --trace "$gen")
        [ "$pool" -gt 0 ] && args+=(--num-gpu-blocks-override "$pool")
        [ "$pc" = off ] && args+=(--no-enable-prefix-caching)
        if ! "$K" "${args[@]}" --steps-out "$tmp/$rel-$name.jsonl" >/dev/null 2>"$tmp/err"; then
            echo "diff: $rel $name: kvlab simulate failed: $(cat "$tmp/err")"
            bad=1
            continue
        fi
        t0=$(date +%s.%N)
        "$K" "${args[@]}" --json >/dev/null 2>&1
        t1=$(date +%s.%N)
        echo "$name $(echo "$t1 - $t0" | bc)" >>"$tmp/kvlab-times"
        files+=("$tmp/$rel-$name.jsonl")
    done <"$tmp/matrix"
    [ ${#files[@]} -gt 0 ] || continue
    t0=$(date +%s.%N)
    "$py" "$here/replay.py" --json "${files[@]}" >"$tmp/out-$rel" 2>"$tmp/err-$rel"
    rc=$?
    t1=$(date +%s.%N)
    ran=1
    python3 - "$rel" "$tmp/out-$rel" "$tmp/kvlab-times" "$(echo "$t1 - $t0" | bc)" "$rc" <<'PY'
import json, sys
rel, out, times, wall, rc = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
kt = dict((l.split()[0], float(l.split()[1])) for l in open(times))
imp, rows, diff = 0.0, [], []
for line in open(out):
    line = line.strip()
    if not line:
        continue
    if line.startswith("{"):
        r = json.loads(line)
        if "import_s" in r:
            imp = r["import_s"]
        else:
            rows.append(r)
    else:
        diff.append(line)
print(f"vLLM {rel}: import {imp:.1f} s, whole replay {wall:.1f} s")
print(f"  {'config':42} {'steps':>7} {'preempt':>7} {'hits':>8} {'kvlab s':>8} {'vLLM loop s':>11} {'ratio':>7}")
for r in rows:
    name = r["file"].rsplit("/", 1)[1].split("-", 1)[1][:-6]
    k = kt.get(name, 0.0)
    ratio = r["loop_s"] / k if k > 0 else 0
    print(f"  {name:42} {r['steps']:7d} {r['preemptions']:7d} {r['prefix_cache_hits']:8d} {k:8.3f} "
          f"{r['loop_s']:11.2f} {ratio:6.0f}x  identical")
big = [r for r in rows if "-n10000-" in r["file"]]
if big:
    r = big[0]
    name = r["file"].rsplit("/", 1)[1].split("-", 1)[1][:-6]
    k = kt.get(name, 0.0)
    whole = imp + r["setup_s"] + r["loop_s"]
    print(f"  side by side, {name}: kvlab simulate {k:.2f} s (whole process) vs vLLM "
          f"{whole:.1f} s (import + scheduler loop): {whole / k:.0f}x")
for d in diff:
    print("  " + d)
if rc == 0:
    print(f"  all {len(rows)} configs identical at every step")
sys.exit(rc)
PY
    rc=$?
    if [ $rc -ne 0 ]; then
        bad=1
        grep -v '^{' "$tmp/err-$rel" | grep -iv "warn\|deprecat\|triton\|cuda\|_C\|block_size\|SSM\|Runner V2" | tail -5
    fi
done
[ $ran -eq 1 ] || { echo "diff: no vLLM venv found under $root: skipped (tests/vllm/setup.sh RELEASE)"; exit 77; }
exit $bad

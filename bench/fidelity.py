#!/usr/bin/env python3
"""How close kvlab's release accounting comes to real vLLM start-up logs.

Runs every case of tests/vectors/real-logs.json through
`kvlab serve --json` under that case's release (--vllm-version) and prints,
per case and term, what kvlab predicts next to what vLLM logged: weights,
activation peak, non-torch memory, the KV memory ("Available KV cache
memory", or V0's kv_cache_size) and the verdict (starts, or why not). The
summary gives the median |KV error| over the cases that logged a KV figure
and the number of wrong verdicts.

  python3 bench/fidelity.py                     # the table
  python3 bench/fidelity.py --check             # exit 1 if a median passes its bound, any verdict is wrong
                                                # or a logged token count is not reproduced from its KV figure
  python3 bench/fidelity.py --case llmd-h100-llama3.1-8b-16k -v   # one case, with kvlab's terms

Python 3 standard library only. KVLAB (or --kvlab) is the binary,
KVLAB_DATA_DIR the source tree (defaults: build/kvlab and this checkout).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# What --check holds the set to (the targets): the median |KV error|
# of every case, and apart of the cases marked "held_out" (chosen before
# their results were looked at, never tuned on: the honest estimate of a set
# kvlab has not seen), and every verdict.
MAX_MEDIAN_KV_ERROR = 0.015
MAX_HELD_OUT_MEDIAN_KV_ERROR = 0.02

# Release ranges the summary breaks the figures down by.
RANGES = [("0.6-0.7", "0.6", "0.8"), ("0.8-0.9", "0.8", "0.10"), ("0.10-0.11", "0.10", "0.12"),
          ("0.12-0.19", "0.12", "0.20"), ("0.20-0.29", "0.20", "0.30"), ("0.30-0.33", "0.30", "9")]


def vkey(v):
    out = []
    for part in v.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out + [0] * (3 - len(out)))


def range_of(version):
    for name, lo, hi in RANGES:
        if vkey(lo) <= vkey(version) < vkey(hi):
            return name
    return "?"


def summarize(rows, label):
    """rows: (case, release, kv_err or None, verdict ok). Prints one line per release range and the total."""
    def line(name, sub):
        errs = [abs(e) for _, _, e, _ in sub if e is not None]
        wrong = [c for c, _, _, ok in sub if not ok]
        med = statistics.median(errs) if errs else float("nan")
        print("  %-10s %3d cases, %3d with KV: median |KV error| %5.2f%%, worst %5.1f%%, verdicts wrong %d%s" % (
            name, len(sub), len(errs), 100 * med, 100 * max(errs) if errs else float("nan"), len(wrong),
            (" (" + ", ".join(wrong) + ")") if wrong else ""))
        return med, errs, wrong
    print(label)
    for name, _, _ in RANGES:
        sub = [r for r in rows if range_of(r[1]) == name]
        if sub:
            line(name, sub)
    return line("all", rows)


def run_case(kvlab, case, extra=()):
    k = case["kvlab"]
    args = [kvlab, "serve", k["model"]]
    if k.get("gpu"):
        args += ["--gpu", k["gpu"]]
    if k.get("gpu_memory_gib"):
        args += ["--gpu-memory-gib", str(k["gpu_memory_gib"])]
    args += ["--vllm-version", k["vllm_version"], "--accounting", "release"]
    args += k.get("flags", [])
    args += list(extra) + ["--json"]
    # vLLM's own variables come from the case alone ("env": the ones its log or
    # post shows), never from the shell that runs the bench.
    env = {n: v for n, v in os.environ.items() if not n.startswith("VLLM_")}
    env.update(k.get("env", {}))
    env.setdefault("KVLAB_DATA_DIR", ROOT)
    env["KVLAB_DEVICE"] = "host"
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    if p.returncode not in (0, 1):
        return None, p.stderr.strip() or "exit %d" % p.returncode
    try:
        return json.loads(p.stdout), None
    except ValueError as e:
        return None, "bad JSON: %s" % e


def capacity_reproduced(kvlab, case, plan):
    """Whether kvlab turns the logged KV figure into the logged "GPU KV cache
    size": the KV memory is pinned to the logged figure's rounding interval
    (+-0.005 GiB) through --weights-gib, and the logged tokens must lie
    between the two capacities kvlab then prints. None when the case logged
    no token count or kvlab's plan did not start."""
    k = case["kvlab"]
    tokens, kv = case.get("logged_gpu_kv_cache_tokens"), k.get("logged_kv_gib")
    if not tokens or not kv or kv <= 0 or not plan["starts"]:
        return None
    w = {t["name"]: t["gib"] for t in plan["terms"]}.get("weights")
    got = []
    for target in (kv - 0.005, kv + 0.005):
        p, err = run_case(kvlab, case, ["--weights-gib", "%.9f" % (w + plan["kv_cache_gib"] - target)])
        if p is None or not p["starts"]:
            return False
        got.append(p["kv_cache_tokens"])
    return got[0] <= tokens <= got[1]


def verdict(plan):
    return "starts" if plan["starts"] else plan["error_kind"]


def logged_terms(case):
    """The terms a case logged, in GiB (None where not shown)."""
    b = case.get("logged_memory_breakdown") or {}
    out = {"weights": case.get("logged_weights_gib"), "activation": b.get("peak_activation_gib"),
           "non_torch": b.get("non_torch_gib")}
    if "peak_torch_memory_gib" in b and case.get("logged_weights_gib"):
        out["activation"] = round(b["peak_torch_memory_gib"] - case["logged_weights_gib"], 2)
    if "non_torch_memory_gib" in b:
        out["non_torch"] = b["non_torch_memory_gib"]
    return out


def predicted_terms(plan):
    t = {x["name"]: x["gib"] for x in plan["terms"]}
    nt = t.get("non_torch", 0) + t.get("nccl", 0)
    if any(x["name"] == "cuda_context" and x["counted"] for x in plan["terms"]):
        nt += t.get("cuda_context", 0)  # the peak accounting counts the context as non-torch
    return {"weights": t.get("weights"), "activation": t.get("activation"), "non_torch": round(nt, 4),
            "kv": plan["kv_cache_gib"]}


def card_is_hopper(k):
    """Whether a case ran on an H100/H200 (most of the set); the others are summarized apart."""
    return (k.get("gpu") or "").startswith(("h100", "h200", "gh200"))


def fmt(v):
    return "   -  " if v is None else "%6.2f" % v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kvlab", default=os.environ.get("KVLAB", os.path.join(ROOT, "build", "kvlab")))
    ap.add_argument("--vectors", default=os.path.join(ROOT, "tests", "vectors", "real-logs.json"))
    ap.add_argument("--case", help="only this case id")
    ap.add_argument("--check", action="store_true", help="exit 1 if the median or a verdict regresses")
    ap.add_argument("-v", "--verbose", action="store_true", help="print kvlab's terms and notes")
    a = ap.parse_args()
    if not os.access(a.kvlab, os.X_OK):
        print("fidelity: no kvlab binary at %s (build it, or set KVLAB)" % a.kvlab, file=sys.stderr)
        return 2
    with open(a.vectors) as f:
        cases = json.load(f)["cases"]
    if a.case:
        cases = [c for c in cases if c["id"] == a.case]
        if not cases:
            print("fidelity: no case %s" % a.case, file=sys.stderr)
            return 2

    errors, wrong, skipped, failed, rows, hopper, capacity = [], [], [], [], [], {}, {}
    held_out = {c["id"] for c in cases if c.get("held_out")}
    print("%-44s %-9s %-26s %-26s %-26s %-22s %s" % ("case", "release", "weights  kvlab  vLLM",
                                                    "activation kvlab vLLM", "non-torch kvlab vLLM",
                                                    "KV GiB kvlab vLLM  err", "verdict"))
    for c in cases:
        k = c["kvlab"]
        if not k.get("run", True):
            skipped.append(c["id"])
            print("%-44s %-9s not run: %s" % (c["id"][:44], k["vllm_version"], k.get("note", "")))
            continue
        plan, err = run_case(a.kvlab, c)
        if plan is None:
            failed.append(c["id"])
            print("%-44s %-9s kvlab failed: %s" % (c["id"][:44], k["vllm_version"], err))
            continue
        p, l = predicted_terms(plan), logged_terms(c)
        kv_err = None
        if k.get("logged_kv_gib") is not None and k["logged_kv_gib"] > 0 and plan["kv_cache_gib"] is not None:
            kv_err = (plan["kv_cache_gib"] - k["logged_kv_gib"]) / k["logged_kv_gib"]
            errors.append(abs(kv_err))
        v, want = verdict(plan), k["verdict"]
        ok = v == want
        if not ok:
            wrong.append(c["id"])
        rows.append((c["id"], k["vllm_version"], kv_err, ok))
        cap = capacity_reproduced(a.kvlab, c, plan)
        if cap is not None:
            capacity[c["id"]] = cap
        hopper[c["id"]] = card_is_hopper(k)
        print("%-44s %-9s %s %s        %s %s        %s %s        %s %s %7s  %s" % (
            c["id"][:44], k["vllm_version"], fmt(p["weights"]), fmt(l["weights"]), fmt(p["activation"]),
            fmt(l["activation"]), fmt(p["non_torch"]), fmt(l["non_torch"]), fmt(p["kv"]), fmt(k.get("logged_kv_gib")),
            "" if kv_err is None else "%+.1f%%" % (100 * kv_err), v if ok else "%s (vLLM: %s) WRONG" % (v, want)))
        if a.verbose:
            for t in plan["terms"]:
                print("      %-12s %8.3f %s %s" % (t["name"], t["gib"], "" if t["counted"] else "(not counted)", t["how"]))
            for line in plan["log"]:
                print("      | " + line[:160])
            if k.get("note"):
                print("      note: " + k["note"])
    print()
    print("cases: %d run, %d not run, %d failed to run" % (len(cases) - len(skipped) - len(failed), len(skipped),
                                                         len(failed)))
    med, errs, wrong_all = summarize(rows, "whole set, by release range:")
    misses = [c for c in cases if not c["kvlab"].get("run", True) and c["kvlab"].get("kvlab_predicts")
              and c["kvlab"]["kvlab_predicts"] != c["kvlab"]["verdict"]]
    if misses:
        print("known misses, not run (kvlab's verdict differs; each note says why): %d: %s" % (
            len(misses), ", ".join("%s (vLLM %s, kvlab %s)" % (c["id"], c["kvlab"]["verdict"], c["kvlab"]["kvlab_predicts"])
                                   for c in misses)))
    off = [r for r in rows if not hopper[r[0]]]
    if off:
        summarize(off, "cards other than H100/H200 (A100, L40S, RTX, custom), by release range:")
    held = [r for r in rows if r[0] in held_out]
    hmed = float("nan")
    if held:
        hmed, _, _ = summarize(held, "held-out cases (not tuned on), by release range:")
    missed = sorted(i for i, ok in capacity.items() if not ok)
    print("capacity from the logged KV figure: %d of %d cases reproduce the logged token count%s" % (
        len(capacity) - len(missed), len(capacity), (" (missed: " + ", ".join(missed) + ")") if missed else ""))
    if not a.check:
        return 0
    bad = []
    if failed:
        bad.append("cases kvlab could not run: " + ", ".join(failed))
    if missed:
        bad.append("capacity not reproduced from the logged KV figure: " + ", ".join(missed))
    if not errs or med > MAX_MEDIAN_KV_ERROR:
        bad.append("median |KV error| %.2f%% > %.1f%%" % (100 * med, 100 * MAX_MEDIAN_KV_ERROR))
    if a.case is None and held and not hmed <= MAX_HELD_OUT_MEDIAN_KV_ERROR:
        bad.append("held-out median |KV error| %.2f%% > %.1f%%" % (100 * hmed, 100 * MAX_HELD_OUT_MEDIAN_KV_ERROR))
    if wrong_all:
        bad.append("verdicts wrong: " + ", ".join(wrong_all))
    for b in bad:
        print("fidelity: " + b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

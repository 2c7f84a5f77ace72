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
  python3 bench/fidelity.py --check             # exit 1 if the median or a verdict regresses
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

# What --check holds the calibration set to (the targets).
MAX_MEDIAN_KV_ERROR = 0.015
# Cases kvlab is known to get wrong, each explained in the case's note; a
# new wrong verdict fails --check, and so does one of these turning right
# without this list being updated (so the list stays true).
KNOWN_WRONG_VERDICTS = {"llmd-787-qwen3-32b-tp2-gmu0.95-sampler-oom"}


def run_case(kvlab, case):
    k = case["kvlab"]
    args = [kvlab, "serve", k["model"]]
    if k.get("gpu"):
        args += ["--gpu", k["gpu"]]
    if k.get("gpu_memory_gib"):
        args += ["--gpu-memory-gib", str(k["gpu_memory_gib"])]
    args += ["--vllm-version", k["vllm_version"], "--accounting", "release"]
    args += k.get("flags", [])
    args += ["--json"]
    env = dict(os.environ)
    env.setdefault("KVLAB_DATA_DIR", ROOT)
    env["KVLAB_DEVICE"] = "host"
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    if p.returncode not in (0, 1):
        return None, p.stderr.strip() or "exit %d" % p.returncode
    try:
        return json.loads(p.stdout), None
    except ValueError as e:
        return None, "bad JSON: %s" % e


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
    if plan.get("engine") == "V0" or any(x["name"] == "cuda_context" and x["counted"] for x in plan["terms"]):
        nt += t.get("cuda_context", 0)  # the peak accounting counts the context as non-torch
    return {"weights": t.get("weights"), "activation": t.get("activation"), "non_torch": round(nt, 4),
            "kv": plan["kv_cache_gib"]}


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

    errors, wrong, skipped, failed = [], [], [], []
    print("%-44s %-8s %-26s %-26s %-26s %-22s %s" % ("case", "release", "weights  kvlab  vLLM",
                                                    "activation kvlab vLLM", "non-torch kvlab vLLM",
                                                    "KV GiB kvlab vLLM  err", "verdict"))
    for c in cases:
        k = c["kvlab"]
        if not k.get("run", True):
            skipped.append(c["id"])
            print("%-44s %-8s not run: %s" % (c["id"][:44], k["vllm_version"], k.get("note", "")))
            continue
        plan, err = run_case(a.kvlab, c)
        if plan is None:
            failed.append(c["id"])
            print("%-44s %-8s kvlab failed: %s" % (c["id"][:44], k["vllm_version"], err))
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
        print("%-44s %-8s %s %s        %s %s        %s %s        %s %s %7s  %s" % (
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
    med = statistics.median(errors) if errors else float("nan")
    print()
    print("cases: %d run, %d not run, %d failed to run" % (len(cases) - len(skipped) - len(failed), len(skipped),
                                                         len(failed)))
    print("median |KV error|: %.2f%% over %d cases with a logged KV figure (max %.1f%%)" % (
        100 * med, len(errors), 100 * max(errors) if errors else float("nan")))
    print("verdicts wrong: %d%s" % (len(wrong), (": " + ", ".join(wrong)) if wrong else ""))
    if not a.check:
        return 0
    bad = []
    if failed:
        bad.append("cases kvlab could not run: " + ", ".join(failed))
    if not errors or med > MAX_MEDIAN_KV_ERROR:
        bad.append("median |KV error| %.2f%% > %.1f%%" % (100 * med, 100 * MAX_MEDIAN_KV_ERROR))
    if a.case is None:
        new = sorted(set(wrong) - KNOWN_WRONG_VERDICTS)
        fixed = sorted(KNOWN_WRONG_VERDICTS - set(wrong))
        if new:
            bad.append("verdicts newly wrong: " + ", ".join(new))
        if fixed:
            bad.append("verdicts now right (update KNOWN_WRONG_VERDICTS): " + ", ".join(fixed))
    for b in bad:
        print("fidelity: " + b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

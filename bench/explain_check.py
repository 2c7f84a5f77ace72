#!/usr/bin/env python3
"""Read real vLLM logs kvlab has not seen with `kvlab explain --json` and
check every logged KV figure, token count and concurrency (and the length
error's needed and available KV memory and estimated length), and the
release wherever the log prints it, against a second, independent reading:
plain regular expressions over the raw text (first occurrence of each line,
the banner's or the engine line's version).

  python3 bench/explain_check.py DIR_OR_FILES...     # prints one line per log and a summary
  KVLAB=build/kvlab (default), KVLAB_DATA_DIR = this checkout

Exit 1 if any figure or release differs. Python 3 standard library only.
"""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

PATTERNS = {
    "kv_cache_gib": (re.compile(r"Available KV cache memory: (-?[\d.]+) GiB"), float),
    "kv_cache_tokens": (re.compile(r"GPU KV cache size: ([\d,]+) tokens"), lambda s: int(s.replace(",", ""))),
    "max_concurrency": (re.compile(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x"), float),
    "gpu_blocks": (re.compile(r"# (?:GPU|CUDA|cuda) blocks: ([\d,]+)"), lambda s: int(s.replace(",", ""))),
}
VERSION = [re.compile(r"\u2588\s+version (\S+)"), re.compile(r"vLLM API server version (\S+)"),
           re.compile(r"Initializing an? (?:V1 )?LLM engine \(v([^)]+)\)")]


# V1's length error (one line): the available KV memory when no "Available
# KV cache memory" line came first, and, from 0.9.1, the estimated length.
ERROR_PATTERNS = {
    "kv_cache_gib": (re.compile(r"larger than the available KV cache memory \((-?[\d.]+) GiB\)"), float),
    "estimated_max_model_len": (re.compile(r"the estimated maximum model length is (\d+)"), int),
    "needed_gib": (re.compile(r"max seq len \(\d+\), \(([\d.]+) GiB KV cache is needed"), float),
}


def independent(text):
    text = ANSI.sub("", text)
    out = {}
    for key, (rx, conv) in PATTERNS.items():
        m = rx.search(text)
        if m:
            out[key] = conv(m.group(1))
    for key, (rx, conv) in ERROR_PATTERNS.items():
        m = rx.search(text)
        if m and key not in out:
            out[key] = conv(m.group(1))
    version = None
    for rx in VERSION:
        m = rx.search(text)
        if m:
            version = m.group(1)
            break
    return out, version


def main(argv):
    kvlab = os.environ.get("KVLAB", os.path.join(ROOT, "build", "kvlab"))
    env = dict(os.environ)
    env.setdefault("KVLAB_DATA_DIR", ROOT)
    env["KVLAB_DEVICE"] = "host"
    files = []
    for a in argv:
        if os.path.isdir(a):
            files += sorted(os.path.join(a, f) for f in os.listdir(a) if f.endswith(".log"))
        else:
            files.append(a)
    bad = figures = versions = logs = 0
    for f in files:
        text = open(f, encoding="utf-8", errors="replace").read()
        want, version = independent(text)
        p = subprocess.run([kvlab, "explain", f, "--json"], capture_output=True, text=True, env=env)
        if p.returncode != 0:
            if want or version:
                print("FAIL %s: exit %d %s" % (os.path.basename(f), p.returncode, p.stderr.strip()))
                bad += 1
            continue
        logs += 1
        d = json.loads(p.stdout)
        miss = []
        for k, v in want.items():
            figures += 1
            got = d["logged"].get(k)
            if got is None or abs(got - v) > 1e-9:
                miss.append("%s %r (log %r)" % (k, got, v))
        if version:
            versions += 1
            if d["vllm_version"] != version.lstrip("v"):
                miss.append("vllm_version %r (log %r)" % (d["vllm_version"], version))
        status = "FAIL" if miss else "ok  "
        bad += bool(miss)
        print("%s %-72s %s" % (status, os.path.basename(f)[:72], "; ".join(miss) if miss else
              "%d figures, release %s (%s)" % (len(want), d["vllm_version"], d["version_from"])))
    print("%d logs read, %d figures and %d releases compared, %d logs with a difference" % (logs, figures, versions, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

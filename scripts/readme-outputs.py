#!/usr/bin/env python3
"""The README's example outputs of kvlab explain, kvlab fit and kvlab serve
--vs are real: every ```-block that starts with "$ kvlab explain|fit|serve
..." is the command's output now. Default: check (exit 1 naming the stale
blocks); --write: rewrite them from the current build (then read the diff).
A `kvlab fit` block without --gpus keeps only the T4 and H100 rows at tp 1
and the summary lines (the full table is 88 rows).

  python3 scripts/readme-outputs.py [--write]      KVLAB=build/kvlab by default
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = re.compile(r"```\n(\$ kvlab (?:explain|fit|serve) .*?)```", re.S)


def run(cmd):
    args = cmd.split()
    args[0] = os.environ.get("KVLAB", os.path.join(ROOT, "build", "kvlab"))
    env = dict(os.environ, KVLAB_DATA_DIR=ROOT, KVLAB_DEVICE="host")
    out = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env).stdout
    if cmd.startswith("kvlab fit") and "--gpus" not in cmd:
        out = "".join(l + "\n" for l in out.splitlines()
                      if re.match(r"^(t4-16gb|h100-80gb-sxm) +1 |.*cheapest", l))
    return out


def render(block):
    parts = re.split(r"(?m)^\$ ", block)
    out = ""
    for part in parts[1:]:
        cmd = part.split("\n", 1)[0]
        out += "$ " + cmd + "\n" + run(cmd)
    return out


def main():
    write = "--write" in sys.argv[1:]
    path = os.path.join(ROOT, "README.md")
    text = open(path, encoding="utf-8").read()
    stale = []

    def repl(m):
        new = render(m.group(1))
        if new != m.group(1):
            stale.append(m.group(1).split("\n", 1)[0])
        return "```\n" + new + "```"

    text2 = BLOCK.sub(repl, text)
    if write:
        open(path, "w", encoding="utf-8").write(text2)
        print("rewrote %d block(s)" % len(stale))
        return 0
    for s in stale:
        print("stale README output: %s (python3 scripts/readme-outputs.py --write)" % s)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())

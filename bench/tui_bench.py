#!/usr/bin/env python3
"""Speed benchmark of the lesson app, measured through a pty (the figures in README.md, "The lesson app").

Runs kvlab in a pseudo-terminal of a given size and reports:
  first_frame_ms      time from exec to the first screen bytes (the header) on the pty
  lesson_on_screen_ms time from exec to the lesson's title on screen (its server started)
  bytes_per_frame     bytes written to the terminal / frames drawn, while the pool animates
  frame_cpu_*_ms      CPU time of one frame (lesson tick + event feed + draw), from the app's
                      own KVLAB_STATS figures
  paused_cpu_pct      CPU used while paused (space), sampled from /proc over a few seconds

Targets (not a timed test; run it by hand): paused ~0 %, <= 3 KB per frame at
80x24, frame CPU < 2 ms at 200x60, first frame within 100 ms.

By default it opens the fixture lesson tests/sh/tui_lessons/01-pool-traffic.lua
(a 400-block pool under shared-prefix traffic, autorun) and presses + twice so
the pool fills, shares, evicts and preempts while it is measured.

usage: bench/tui_bench.py [--kvlab build/kvlab] [--size 80x24] [--lessons DIR] [--lesson N]
                          [--keys "+ +"] [--seconds 5] [--fps 30] [--json]
"""
import argparse
import fcntl
import json
import os
import pty
import select
import shutil
import signal
import struct
import sys
import tempfile
import termios
import time


def spawn(kvlab, cols, rows, args, env):
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.execve(kvlab, [kvlab] + args, env)
    return pid, fd


def pump(fd, seconds, sink):
    """Read everything the app writes for `seconds`; returns bytes read."""
    end = time.monotonic() + seconds
    n = 0
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return n
        r, _, _ = select.select([fd], [], [], left)
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:
                return n
            if not data:
                return n
            n += len(data)
            sink.append(data)


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return int(parts[11]) + int(parts[12])  # utime + stime


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kvlab", default=os.path.join(os.path.dirname(__file__), "..", "build", "kvlab"))
    ap.add_argument("--size", default="80x24")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--lessons", default=os.path.join(here, "..", "tests", "sh", "tui_lessons"),
                    help="lessons folder (KVLAB_LESSONS_DIR); '' = the course")
    ap.add_argument("--lesson", type=int, default=1)
    ap.add_argument("--keys", default="+ +", help="keys sent after start-up (space separated; 'SPACE' for a space)")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--fps", type=int, default=30)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    cols, rows = (int(x) for x in a.size.lower().split("x"))
    state = tempfile.mkdtemp(prefix="kvlab-bench-")
    stats = os.path.join(state, "stats.json")
    env = dict(os.environ, TERM=os.environ.get("BENCH_TERM", "xterm-256color"), XDG_STATE_HOME=state,
               KVLAB_STATS=stats, LANG=os.environ.get("LANG", "C.UTF-8"))
    args = ["--fps", str(a.fps)]
    if a.lesson:
        args += ["--lesson", str(a.lesson)]
    if a.lessons:
        env["KVLAB_LESSONS_DIR"] = os.path.abspath(a.lessons)
    t0 = time.monotonic()
    pid, fd = spawn(os.path.abspath(a.kvlab), cols, rows, args, env)
    out = []
    first = None
    buf = b""
    while time.monotonic() - t0 < 5:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            data = os.read(fd, 65536)
            out.append(data)
            buf += data
            if b"kvlab" in buf:
                first = (time.monotonic() - t0) * 1e3
                break
    # Time to the lesson itself on screen (its server started).
    lesson_ms = None
    while time.monotonic() - t0 < 10:
        if b"Lesson " in buf:
            lesson_ms = (time.monotonic() - t0) * 1e3
            break
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            data = os.read(fd, 65536)
            out.append(data)
            buf += data
    # Let start-up settle, then send the keys that make the pool animate.
    pump(fd, 1.0, out)
    for k in a.keys.split():
        os.write(fd, b" " if k == "SPACE" else k.encode())
        pump(fd, 0.3, out)
    animate_bytes = pump(fd, a.seconds, out)
    # Pause and sample CPU.
    os.write(fd, b" ")
    pump(fd, 0.5, out)
    c0, w0 = cpu_ticks(pid), time.monotonic()
    pump(fd, 3.0, out)
    c1, w1 = cpu_ticks(pid), time.monotonic()
    hz = os.sysconf("SC_CLK_TCK")
    paused_pct = (c1 - c0) / hz / (w1 - w0) * 100.0
    os.write(fd, b"q")
    pump(fd, 1.0, out)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    total = sum(len(x) for x in out)
    st = {}
    try:
        with open(stats) as f:
            st = json.load(f)
    except (OSError, ValueError):
        pass
    frames = st.get("frames", 0)
    res = {
        "size": a.size,
        "lesson": a.lesson,
        "first_frame_ms": round(first, 1) if first is not None else None,
        "app_first_frame_ms": st.get("first_frame_ms"),
        "lesson_on_screen_ms": round(lesson_ms, 1) if lesson_ms is not None else None,
        "frames": frames,
        "total_bytes": total,
        "bytes_per_frame": round(total / frames, 1) if frames else None,
        "animate_bytes_per_s": round(animate_bytes / a.seconds, 1),
        "frame_cpu_mean_ms": st.get("frame_cpu_mean_ms"),
        "frame_cpu_p95_ms": st.get("frame_cpu_p95_ms"),
        "frame_cpu_max_ms": st.get("frame_cpu_max_ms"),
        "paused_cpu_pct": round(paused_pct, 2),
    }
    shutil.rmtree(state, ignore_errors=True)
    if a.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:22} {v}")


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())

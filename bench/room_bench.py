#!/usr/bin/env python3
"""Classroom benchmark: one presenter and N followers (default 30), each a kvlab
in its own pseudo-terminal on this machine, stepping through the lesson in
bench/room_lessons (still pages, then pages over a pool animating under
traffic at --fps). Reports:

  latency_still_ms   p50/p99 from the presenter's key (written to its pty) to
                     the first bytes each follower writes to its own pty
                     after it, on still pages (nothing else is drawn there)
  latency_running_ms p50/p99 from the presenter handling a key to a follower
                     drawing the frame that shows it, on the running pages
                     (from KVLAB_ROOM_TRACE, one monotonic clock for all)
  bytes_per_s_per_follower  socket bytes the presenter sent while the pool
                     ran, per second and per follower
  presenter_cpu_pct_per_follower  (presenter CPU with N followers - with none)
                     / N, in % of one core, over the same running pages
  follower_rss_mib / follower_pss_mib  memory of one follower (mean)

With --join-at STEPS it measures a late join instead: one follower starts
once the presenter's engine (the pool under traffic at x64) is STEPS in, and
the time to its first frame with the presenter's state is reported.

With --busy-seconds S it measures memory instead: the presenter runs the
pool under traffic at its fastest speed (+ pressed to x64: about 1,900
engine steps a second, so a minute stands for ~1.6 hours of the lesson's
own x1 pace) for S seconds with the followers attached, and it reports each
sample of follower RSS (mean and max over the followers), the growth per
minute over the second half, and the engine steps the presenter reached.

Goal (issue: classroom mode): latency p99 < 100 ms, presenter CPU < 1 % per
follower at 30 fps. Not a timed test: run it by hand on an otherwise idle
machine; all N+1 processes share its cores.

usage: bench/room_bench.py [--kvlab build/kvlab] [--followers 30] [--size 80x24]
                           [--fps 30] [--keys 10] [--seconds 8] [--busy-seconds S]
                           [--join-at STEPS] [--json]
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def spawn(kvlab, cols, rows, args, env):
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.execve(kvlab, [kvlab] + args, env)
    fl = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, fl | os.O_NONBLOCK)
    return pid, fd


class Procs:
    """The ptys: read everything (a full pty would block the app), note when
    each last wrote and what it wrote recently."""

    def __init__(self):
        self.fds = {}        # fd -> name
        self.last = {}       # name -> monotonic time of its last bytes
        self.first_after = {}  # name -> first bytes after a mark
        self.tail = {}       # name -> last 64 KiB of output
        self.mark = None

    def add(self, name, fd):
        self.fds[fd] = name
        self.last[name] = time.monotonic()
        self.tail[name] = b""

    def pump(self, seconds):
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            r, _, _ = select.select(list(self.fds), [], [], min(left, 0.05))
            now = time.monotonic()
            for fd in r:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    continue
                name = self.fds[fd]
                self.last[name] = now
                if self.mark is not None and name not in self.first_after:
                    self.first_after[name] = now
                self.tail[name] = (self.tail[name] + data)[-65536:]

    def wait_quiet(self, names, quiet_s, timeout_s):
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            self.pump(0.05)
            now = time.monotonic()
            if all(now - self.last[n] >= quiet_s for n in names):
                return True
        return False

    def wait_text(self, names, text, timeout_s):
        end = time.monotonic() + timeout_s
        want = text.encode()
        while time.monotonic() < end:
            self.pump(0.05)
            if all(want in self.tail[n] for n in names):
                return True
        return False


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def mem_kib(pid):
    rss = pss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def pct(v, p):
    if not v:
        return float("nan")
    v = sorted(v)
    k = min(len(v) - 1, max(0, int(round(p / 100.0 * (len(v) - 1)))))
    return v[k]


def read_trace(path):
    """KVLAB_ROOM_TRACE lines: keys {seq: t}, drawn [(seq, t)],
    stats [[t, bytes, states, deltas, skipped, n, engine ticks]]."""
    keys, drawn, stats = {}, [], []
    try:
        with open(path) as f:
            for line in f:
                w = line.split()
                if len(w) >= 3 and w[0] == "key":
                    keys[int(w[1])] = float(w[2])
                elif len(w) >= 3 and w[0] == "drawn":
                    drawn.append((int(w[1]), float(w[2])))
                elif len(w) >= 7 and w[0] == "stats":
                    stats.append([float(w[1])] + [int(x) for x in w[2:]])
    except OSError:
        pass
    return keys, drawn, stats


def late_join(a, press, procs, ptrace, env, tmp, pids, cols, rows):
    """One follower joins when the presenter's engine is --join-at steps in:
    time from its start to its first frame with the presenter's state."""
    for _ in range(12):  # x64
        press(b"+")
        procs.pump(0.05)
    end = time.monotonic() + 600
    ticks = 0
    while time.monotonic() < end:
        procs.pump(1.0)
        st = read_trace(ptrace)[2]
        ticks = st[-1][6] if st and len(st[-1]) > 6 else 0
        if ticks >= a.join_at:
            break
    if ticks < a.join_at:
        sys.exit(f"room_bench: the presenter reached only {ticks} engine steps")
    trace = os.path.join(tmp, "late.trace")
    t0 = time.monotonic()
    pid, fd = spawn(a.kvlab, cols, rows, ["--follow", "bench", "--fps", str(a.fps)], dict(env, KVLAB_ROOM_TRACE=trace))
    pids.append(pid)
    procs.add("late", fd)
    end = time.monotonic() + 120
    while time.monotonic() < end and not read_trace(trace)[1]:
        procs.pump(0.01)
    drawn = read_trace(trace)[1]
    if not drawn:
        sys.exit("room_bench: the late follower never showed the lesson")
    st = read_trace(ptrace)[2]
    out = {"join_at_engine_steps": ticks, "presenter_steps_at_end": st[-1][6] if st else None,
           "late_join_ms": round((drawn[0][1] - t0) * 1e3, 1)}
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"late join at {ticks} engine steps: first frame with the presenter's state after "
              f"{out['late_join_ms']} ms (goal: 300 ms)")


def busy(a, press, procs, ppid, fpids, ptrace, traces, names):
    """Follower memory over a busy run at the presenter's fastest speed."""
    for _ in range(12):  # x1.5 per press, up to x64
        press(b"+")
        procs.pump(0.05)
    t0 = time.monotonic()
    samples = []
    while True:
        procs.pump(min(5.0, max(0.1, t0 + a.busy_seconds - time.monotonic())))
        t = time.monotonic() - t0
        mem = [mem_kib(p)[0] / 1024 for p in fpids]
        mem = [m for m in mem if m > 0]
        if not mem:
            sys.exit("room_bench: the followers are gone")
        samples.append((t, sum(mem) / len(mem), max(mem), mem_kib(ppid)[0] / 1024))
        if t >= a.busy_seconds:
            break
    if os.environ.get("ROOM_BENCH_SMAPS"):  # where a follower's memory is (debugging)
        rows, cur = [], None
        with open(f"/proc/{fpids[0]}/smaps") as f:
            for line in f:
                if "-" in line.split()[0] and len(line.split()) >= 5:
                    cur = line.strip()
                elif line.startswith("Rss:") and cur:
                    rows.append((int(line.split()[1]), cur))
        for kib, m in sorted(rows, reverse=True)[:8]:
            print(f"  smaps {kib:8d} KiB  {m}", file=sys.stderr)
    half = [s for s in samples if s[0] >= a.busy_seconds / 2]
    slope = (half[-1][1] - half[0][1]) / max(1e-9, half[-1][0] - half[0][0]) * 60 if len(half) > 1 else 0.0
    out = {"followers": a.followers, "busy_seconds": a.busy_seconds,
           "follower_rss_mib_mean_end": round(samples[-1][1], 1),
           "follower_rss_mib_max": round(max(s[2] for s in samples), 1),
           "follower_rss_growth_mib_per_min_second_half": round(slope, 2),
           "presenter_rss_mib_end": round(samples[-1][3], 1),
           "samples": [[round(x, 1) for x in s] for s in samples]}
    st = read_trace(ptrace)[2]
    if st:
        out["presenter_messages"] = int(st[-1][2] + st[-1][3])
        if len(st[-1]) > 6:
            out["presenter_engine_steps"] = int(st[-1][6])
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"{a.followers} followers, {a.busy_seconds:.0f} s of a busy room at x64")
        print("  t(s)  follower RSS mean / max (MiB)  presenter RSS (MiB)")
        for t, mean, mx, pr in samples:
            print(f"  {t:5.0f}  {mean:8.1f} / {mx:6.1f}   {pr:8.1f}")
        for k in ("follower_rss_mib_mean_end", "follower_rss_mib_max", "follower_rss_growth_mib_per_min_second_half",
                  "presenter_rss_mib_end", "presenter_engine_steps"):
            if k in out:
                print(f"  {k:46s} {out[k]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kvlab", default=os.path.join(ROOT, "build", "kvlab"))
    ap.add_argument("--followers", type=int, default=30)
    ap.add_argument("--size", default="80x24")
    ap.add_argument("--fps", type=int, default=30)
    ap.add_argument("--keys", type=int, default=10, help="n presses measured on running pages and on still pages")
    ap.add_argument("--seconds", type=float, default=8.0, help="CPU and bytes window on the running pages")
    ap.add_argument("--busy-seconds", type=float, default=0,
                    help="instead of latency: follower memory over S seconds of a busy room at x64")
    ap.add_argument("--join-at", type=int, default=0,
                    help="instead of latency: one follower joins once the presenter's engine is this many steps in")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    a.keys = max(1, min(a.keys, 11))
    cols, rows = (int(x) for x in a.size.split("x"))
    tmp = tempfile.mkdtemp(prefix="kvlab-roombench-")
    rooms = os.path.join(tmp, "rooms")
    os.mkdir(rooms)
    os.chmod(rooms, 0o1777)
    run = os.path.join(tmp, "run")
    os.mkdir(run, 0o700)
    env = dict(os.environ, TERM="xterm-256color", KVLAB_ROOMS_DIR=rooms, XDG_RUNTIME_DIR=run,
               XDG_STATE_HOME=os.path.join(tmp, "state"), KVLAB_LESSONS_DIR=os.path.join(HERE, "room_lessons"),
               KVLAB_DEVICE="host", KVLAB_DATA_DIR=ROOT)
    ptrace = os.path.join(tmp, "presenter.trace")
    pids = []
    procs = Procs()
    try:
        ppid, pfd = spawn(a.kvlab, cols, rows, ["--present", "bench", "--lesson", "1", "--fps", str(a.fps)],
                          dict(env, KVLAB_ROOM_TRACE=ptrace))
        pids.append(ppid)
        procs.add("presenter", pfd)
        if not procs.wait_text(["presenter"], "Intro", 20):
            sys.exit("room_bench: the presenter did not show its lesson")
        procs.wait_quiet(["presenter"], 0.5, 10)

        def press(key):
            os.write(pfd, key)

        def last_seq():
            k = read_trace(ptrace)[0]
            return max(k) if k else 0

        # 1. The presenter alone over the running pool.
        press(b"n")
        procs.pump(1.5)
        c0, t0 = cpu_s(ppid), time.monotonic()
        procs.pump(a.seconds)
        cpu_alone = (cpu_s(ppid) - c0) / (time.monotonic() - t0)

        if a.join_at > 0:
            late_join(a, press, procs, ptrace, env, tmp, pids, cols, rows)
            return

        # 2. N followers join the running lesson late: time to their first
        # frame showing the presenter's state.
        names, traces, spawned = [], {}, {}
        for i in range(a.followers):
            name = f"f{i}"
            traces[name] = os.path.join(tmp, f"{name}.trace")
            spawned[name] = time.monotonic()
            pid, fd = spawn(a.kvlab, cols, rows, ["--follow", "bench", "--fps", str(a.fps)],
                            dict(env, KVLAB_ROOM_TRACE=traces[name]))
            pids.append(pid)
            procs.add(name, fd)
            names.append(name)
        end = time.monotonic() + 60
        while time.monotonic() < end and not all(read_trace(traces[n])[1] for n in names):
            procs.pump(0.1)
        joined = [read_trace(traces[n])[1] for n in names]
        if not all(joined):
            sys.exit(f"room_bench: {sum(1 for j in joined if not j)} followers never showed the lesson")
        # the traces' T and this script's time.monotonic() are one clock (CLOCK_MONOTONIC)
        join_ms = [(joined[i][0][1] - spawned[n]) * 1e3 for i, n in enumerate(names)]

        if a.busy_seconds > 0:
            busy(a, press, procs, ppid, pids[1:], ptrace, traces, names)
            return

        # 3. Presenter CPU and socket bytes with N followers, same pages.
        procs.pump(1.0)
        st0 = read_trace(ptrace)[2]
        c0, t0 = cpu_s(ppid), time.monotonic()
        procs.pump(a.seconds)
        cpu_with = (cpu_s(ppid) - c0) / (time.monotonic() - t0)
        st1 = read_trace(ptrace)[2]
        bps = float("nan")
        if st0 and st1 and st1[-1][0] > st0[-1][0]:
            bps = (st1[-1][1] - st0[-1][1]) / (st1[-1][0] - st0[-1][0]) / max(1, st1[-1][5])

        # 4. Keys on the running pages: presenter key -> follower frame.
        def key_latencies(count, gap):
            seqs = []
            for _ in range(count):
                before = last_seq()
                press(b"n")
                end = time.monotonic() + 10
                while time.monotonic() < end and last_seq() == before:
                    procs.pump(0.02)
                procs.pump(gap)
                seqs.append(last_seq())
            keys = read_trace(ptrace)[0]
            out = []
            for n in names:
                drawn = read_trace(traces[n])[1]
                for s in seqs:
                    t = next((t for (q, t) in drawn if q >= s), None)
                    if t is not None and s in keys:
                        out.append((t - keys[s]) * 1e3)
            return out

        running = key_latencies(a.keys, 0.6)
        mem = [mem_kib(p) for p in pids[1:]]
        # 5. Still pages: key -> the first bytes on each follower's pty.
        while b"Still page 1" not in procs.tail["presenter"]:
            press(b"n")
            procs.pump(0.5)
        still = []
        for _ in range(a.keys):
            procs.wait_quiet(["presenter"] + names, 0.5, 20)
            procs.first_after = {}
            procs.mark = time.monotonic()
            press(b"n")
            procs.pump(0.8)
            for n in names:
                if n in procs.first_after:
                    still.append((procs.first_after[n] - procs.mark) * 1e3)
            procs.mark = None

        out = {
            "followers": a.followers, "size": a.size, "fps": a.fps, "cores": os.cpu_count(),
            "join_ms": {"p50": round(pct(join_ms, 50), 1), "p99": round(pct(join_ms, 99), 1), "n": len(join_ms)},
            "latency_running_ms": {"p50": round(pct(running, 50), 1), "p99": round(pct(running, 99), 1),
                                   "n": len(running)},
            "latency_still_ms": {"p50": round(pct(still, 50), 1), "p99": round(pct(still, 99), 1), "n": len(still)},
            "bytes_per_s_per_follower": round(bps),
            "presenter_cpu_pct_alone": round(cpu_alone * 100, 2),
            "presenter_cpu_pct_with": round(cpu_with * 100, 2),
            "presenter_cpu_pct_per_follower": round((cpu_with - cpu_alone) * 100 / max(1, a.followers), 3),
            "follower_rss_mib": round(sum(m[0] for m in mem) / len(mem) / 1024, 1),
            "follower_pss_mib": round(sum(m[1] for m in mem) / len(mem) / 1024, 1),
        }
        if a.json:
            print(json.dumps(out, indent=1))
        else:
            print(f"{a.followers} followers at {a.size}, {a.fps} fps, {os.cpu_count()} cores")
            for k in ("join_ms", "latency_running_ms", "latency_still_ms"):
                print(f"  {k:32s} p50 {out[k]['p50']:7.1f}   p99 {out[k]['p99']:7.1f}   ({out[k]['n']} samples)")
            for k in ("bytes_per_s_per_follower", "presenter_cpu_pct_alone", "presenter_cpu_pct_with",
                      "presenter_cpu_pct_per_follower", "follower_rss_mib", "follower_pss_mib"):
                print(f"  {k:32s} {out[k]}")
    finally:
        for p in pids:
            try:
                os.kill(p, signal.SIGTERM)
            except OSError:
                pass
        for p in pids:
            try:
                os.waitpid(p, 0)
            except OSError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

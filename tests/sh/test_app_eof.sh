#!/usr/bin/env bash
# The app and its terminal: kvlab with stdin or stdout not a terminal is
# refused with one line (exit 2, nothing drawn into a redirected stdout);
# a terminal that goes away without a SIGHUP (the pty's other end closes
# while kvlab is in its own session, as after setsid or nohup) ends the app
# at once as a hang-up (exit 129), progress kept, instead of spinning on end
# of input; a presenter whose terminal goes away closes its room the same way.
# Deadlines are conditions polled up to 60 s times KVLAB_TIME_SCALE (3).
set -uo pipefail
[ "${KVLAB_TUI:-1}" = "0" ] || [ "${KVLAB_TUI:-}" = "OFF" ] && { echo "no lesson app: skipping"; exit 77; }
command -v python3 >/dev/null || { echo "no python3: skipping"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_STATE_HOME="$tmp/state" XDG_RUNTIME_DIR="$tmp/run" TERM=xterm-256color
mkdir -p "$XDG_STATE_HOME" "$XDG_RUNTIME_DIR"
chmod 700 "$XDG_RUNTIME_DIR"
fail=0

# 1. stdin from /dev/null: one line, exit 2, at once.
t0=$(date +%s%N)
timeout 20 "$KVLAB" </dev/null >"$tmp/out" 2>"$tmp/err"; rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "kvlab < /dev/null: exit $rc in $ms ms: $(cat "$tmp/err")"
[ "$rc" -eq 2 ] || { echo "FAIL: kvlab < /dev/null exit $rc, wanted 2"; fail=1; }
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "stdin and stdout are not one" "$tmp/err" || { echo "FAIL: message"; fail=1; }
[ -s "$tmp/out" ] && { echo "FAIL: drew into stdout"; fail=1; }

# 2. and 3. need a pseudo-terminal: python's pty module.
python3 - "$KVLAB" "$tmp" "${KVLAB_TIME_SCALE:-3}" <<'PY' || fail=1
import fcntl, json, os, select, struct, subprocess, sys, termios, time
kvlab, tmp, scale = sys.argv[1], sys.argv[2], float(sys.argv[3])
bad = 0

def pty():
    m, s = os.openpty()
    fcntl.ioctl(s, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    return m, s

def read_until(m, want, secs):
    buf, end = b"", time.time() + secs * scale
    while want not in buf:
        left = end - time.time()
        if left <= 0:
            return None
        r, _, _ = select.select([m], [], [], left)
        if r:
            try:
                chunk = os.read(m, 65536)
            except OSError:
                return None
            if not chunk:
                return None
            buf += chunk
    return buf

def wait_exit(p, secs):
    """exit status and CPU seconds, or (None, cpu) when it did not end in time"""
    end = time.time() + secs * scale
    while time.time() < end:
        pid, st, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            return (os.waitstatus_to_exitcode(st), ru.ru_utime + ru.ru_stime)
        time.sleep(0.05)
    p.kill()
    _, st, ru = os.wait4(p.pid, 0)
    return (None, ru.ru_utime + ru.ru_stime)

# 2. stdout redirected to a file, stdin a terminal: refused, the file stays empty.
m, s = pty()
out = open(os.path.join(tmp, "drawn"), "wb")
p = subprocess.Popen([kvlab], stdin=s, stdout=out, stderr=subprocess.PIPE, start_new_session=True)
os.close(s)
err = p.stderr.read().decode()
rc = p.wait(timeout=20 * scale)
out.close()
os.close(m)
size = os.path.getsize(os.path.join(tmp, "drawn"))
print(f"kvlab > file: exit {rc}, {size} bytes drawn, {err.strip()}")
if rc != 2 or size != 0 or "stdout is not one" not in err or err.count("\n") != 1:
    print("FAIL: kvlab > file"); bad = 1

def gone(args, what):
    global bad
    m, s = pty()
    p = subprocess.Popen([kvlab] + args, stdin=s, stdout=s, stderr=s, start_new_session=True)
    os.close(s)  # kvlab is in its own session: the pty is not its controlling terminal, no SIGHUP comes
    if read_until(m, b"n: next", 60) is None:
        print(f"FAIL: {what}: no first screen"); p.kill(); p.wait(); bad = 1; return
    return m, p

def close_and_wait(m, p, what):
    global bad
    os.close(m)  # the terminal goes away
    t0 = time.time()
    rc, cpu = wait_exit(p, 20)
    print(f"{what}: terminal closed: exit {rc} after {time.time() - t0:.2f} s, {cpu:.2f} s of CPU in all")
    if rc != 129:
        print(f"FAIL: {what}: exit {rc}, wanted 129 (it spins or hangs at end of input)"); bad = 1
    return rc

# 3. the learner's terminal goes away after a step: the app ends, progress kept.
r = gone(["--lesson", "1"], "app")
if r:
    m, p = r
    os.write(m, b"n")
    prog = os.path.join(tmp, "state", "kvlab", "progress.json")
    end, step = time.time() + 60 * scale, 0
    while time.time() < end and step < 1:
        try:
            d = json.load(open(prog))
            step = max((l.get("step", 0) for l in d.get("lessons", {}).values()), default=0) \
                if isinstance(d.get("lessons"), dict) else 1
        except Exception:
            pass
        time.sleep(0.1)
    if step < 1:
        print("FAIL: app: no step saved after n"); bad = 1
    close_and_wait(m, p, "app")
    try:
        json.load(open(prog)); print("progress.json intact")
    except Exception as e:
        print(f"FAIL: progress.json after the hang-up: {e}"); bad = 1

# 4. a presenter whose terminal goes away closes its room.
r = gone(["--present", "eofroom", "--lesson", "1"], "presenter")
if r:
    m, p = r
    close_and_wait(m, p, "presenter")
    rooms = subprocess.run([kvlab, "rooms"], capture_output=True, text=True, timeout=20 * scale)
    if "eofroom" in rooms.stdout:
        print("FAIL: presenter: the room is still listed:\n" + rooms.stdout); bad = 1
sys.exit(bad)
PY
[ "$fail" = 0 ] && echo PASS
exit $fail

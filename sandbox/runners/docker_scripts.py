"""Programs the Docker runner runs *inside* its containers (stdlib only: any image with Python).

* ``REAPER`` — PID 1: reaps orphans, exits on SIGTERM.
* ``BOOT`` — the per-job supervisor (root, CAP_SETUID/SETGID only): unpacks the job's files,
  starts the job as the sandbox uid, drains its output keeping the tails, reports the status.
* ``FINISH`` — after a job: kills strays, returns the collected files, wipes /work and /tmp.

Kept apart from ``docker_runner.py`` so the host-side logic reads on its own; they are strings
because they run in the container's interpreter, never in Arbor's.
"""

from __future__ import annotations

import json

from .jobio import TailBuffer

__all__ = ["REAPER", "BOOT", "FINISH", "STATUS_MARK", "MAX_COLLECT", "split_status"]

REAPER = r"""
import os, signal, time
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(1)
"""
# The job's supervisor, run as root in the container with only CAP_SETUID/CAP_SETGID: it reads
# the job's files (a tar on stdin — ``put_archive`` refuses a read-only root even for tmpfs
# paths), forks the job, which drops to the sandbox uid (losing every capability), unpacks its
# files, applies the rlimits and execs; the supervisor drains the job's output *inside* the
# container keeping only the tails (a 1 GiB flood never crosses the engine's API, ~100 MB/s) and
# ends its stderr with a status trailer. Running as another uid, it cannot be killed by the job
# ("kill your parent" gets EPERM, as with Landlock in the local runner).
STATUS_MARK = b"\0ARBOR-STATUS\0"
BOOT = r"""
import io, json, os, resource, sys, tarfile, threading, time
jobdir, uid, limits, cap, argv = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
data = sys.stdin.buffer.read()
pipes = [os.pipe(), os.pipe()]
pid = os.fork()
if pid == 0:
    try:
        os.setgroups([]); os.setgid(uid); os.setuid(uid)  # from here on: no capabilities at all
        os.setsid()  # kill(0, ...) by the job reaches its own group only
        os.umask(0o077)
        os.mkdir(jobdir, 0o700)
        with tarfile.open(fileobj=io.BytesIO(data)) as t:
            t.extractall(jobdir)
        os.chdir(jobdir)
        fd = os.open(os.devnull, os.O_RDONLY); os.dup2(fd, 0)
        os.dup2(pipes[0][1], 1); os.dup2(pipes[1][1], 2)
        for r, w in pipes:
            os.close(r); os.close(w)
        for name, value in limits.items():
            which = getattr(resource, name)
            hard = resource.getrlimit(which)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (value, value))
        os.execvp(argv[0], argv)
    except BaseException as e:
        os.write(2, ("arbor sandbox: cannot start %r: %s\n" % (argv[0], e)).encode())
        os._exit(127)
del data
tails, totals = [bytearray(), bytearray()], [0, 0]
def drain(i):
    fd = pipes[i][0]
    while True:
        d = os.read(fd, 1 << 20)
        if not d:
            return
        totals[i] += len(d); tails[i] += d
        if len(tails[i]) > 2 * cap:
            del tails[i][:len(tails[i]) - cap]
threads = [threading.Thread(target=drain, args=(i,), daemon=True) for i in (0, 1)]
for i, t in enumerate(threads):
    os.close(pipes[i][1]); t.start()
_, status = os.waitpid(pid, 0)
deadline = time.monotonic() + 1.0  # a stray holding the pipes cannot keep us here
for t in threads:
    t.join(max(deadline - time.monotonic(), 0.0))
sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
rc = -sig if sig else os.WEXITSTATUS(status)
out, err = (bytes(b[-cap:]) if cap else b"" for b in tails)
os.write(1, out)
trailer = json.dumps({"rc": rc, "signal": sig, "out": totals[0], "err": totals[1]}).encode()
os.write(2, err + MARK + trailer)
os._exit(0)
""".replace("MARK", repr(STATUS_MARK))
# After a job: kill everything but PID 1 and ourselves, tar the requested outputs to stdout,
# empty /work and /tmp, report the stray count on stderr. Exit 3 when processes would not die
# (the runner then recycles the container).
FINISH = r"""
import io, json, os, shutil, sys, tarfile, time
jobdir, names, cap = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
me = os.getpid(); n = 0
for _ in range(100):
    ps = [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) not in (1, me)]
    if not ps: break
    for p in ps:
        try: os.kill(p, 9); n += 1
        except OSError: pass
    time.sleep(0.01)
else:
    sys.exit(3)
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode='w') as t:
    for name in names:
        p = os.path.join(jobdir, name)
        if os.path.isfile(p) and not os.path.islink(p) and os.path.getsize(p) <= cap:
            t.add(p, arcname=name)
sys.stdout.buffer.write(buf.getvalue())
for d in ('/work', '/tmp'):
    for e in os.listdir(d):
        p = os.path.join(d, e)
        shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
sys.stderr.write(str(n))
"""
MAX_COLLECT = 256 << 20


def split_status(err: TailBuffer, limit: int) -> dict | None:
    """Cut the supervisor's trailer off the stderr tail; the *last* mark is the real one (the job
    wrote everything before it, so a forged trailer in its own output is just text)."""
    data = bytes(err._buf)
    i = data.rfind(STATUS_MARK)
    if i < 0:
        return None
    try:
        status = json.loads(data[i + len(STATUS_MARK):])
    except ValueError:
        return None
    err._buf, err.limit = bytearray(data[:i][-limit:] if limit else b""), limit
    err.total = len(data[:i])
    return status if isinstance(status, dict) else None

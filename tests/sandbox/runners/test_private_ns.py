"""A job's descendants get what CUDA's driver needs: their own /proc entries writable and a
private /dev/shm — and nothing of another job's or the host's (sandbox/runners/private_ns.py)."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import uuid

import pytest

from arbor.sandbox.runners import isolation, private_ns
from arbor.sandbox.runners.local import LocalRunner
from arbor.sandbox.runner import Job, PythonEntry

from tests.hostile.helpers import leftovers

PY = sys.executable
pytestmark = pytest.mark.skipif(not (private_ns.available() and isolation.landlock_abi() >= 3),
                                reason="needs private PID/mount namespaces (root or user namespaces) and Landlock >= 3")

# the grandchild: what the driver does (its own /proc/<pid> opened for writing with O_TRUNC, a
# thread's own comm), what multiprocessing does (/dev/shm), and what it must not reach
GRANDCHILD = textwrap.dedent("""
    import errno, json, os, sys, threading
    def write(path, text=None):
        try:
            old = open(path).read() if text is None else text
            with open(path, "w") as f:
                f.write(old)
            return "ok"
        except OSError as e:
            return errno.errorcode[e.errno]
    out = {"pid": os.getpid(), "own": write("/proc/self/comm"), "own_attr": write("/proc/self/oom_score_adj")}
    t = threading.Thread(target=lambda: out.update(thread=write(f"/proc/self/task/{threading.get_native_id()}/comm")))
    t.start(); t.join()
    out["shm"] = write(f"/dev/shm/{sys.argv[1]}-job", "x")
    out["host_shm_seen"] = os.path.exists(f"/dev/shm/{sys.argv[1]}-host")
    out["arbor"] = write(f"/proc/{sys.argv[2]}/oom_score_adj", "0")
    out["sysctl"] = write("/proc/sys/kernel/hostname")
    out["pids"] = sorted(int(n) for n in os.listdir("/proc") if n.isdigit())
    print(json.dumps(out))
""")
SPAWN = "import subprocess, sys; sys.exit(subprocess.run([sys.executable, '-c', sys.argv[1]] + sys.argv[2:]).returncode)"


def test_a_jobs_grandchild_writes_its_own_proc_and_shm_and_reaches_nobody_elses():
    tag = f"arbor-test-{uuid.uuid4().hex[:8]}"
    host_file = f"/dev/shm/{tag}-host"
    open(host_file, "w").close()
    try:
        with LocalRunner(network="host") as r:  # the default filesystem: isolate
            assert r.plan.private_ns, r.plan
            # job -> child -> grandchild: each argv is [code, next code..., tag, arbor pid]
            argv = [PY, "-c", SPAWN, SPAWN, GRANDCHILD, tag, str(os.getpid())]
            res = r.run(Job(argv, {}, timeout_s=30))
        out = json.loads(res.stdout_tail.strip().splitlines()[-1])
    finally:
        os.unlink(host_file)
    assert res.returncode == 0, res.stderr_tail
    assert (out["own"], out["own_attr"], out["thread"]) == ("ok", "ok", "ok"), out
    assert out["shm"] == "ok" and not out["host_shm_seen"], out  # its own /dev/shm, not the host's
    assert not os.path.exists(f"/dev/shm/{tag}-job")  # ... and its files never reach the host's
    assert out["arbor"] == "ENOENT", out  # Arbor (another job alike) is not in its /proc at all
    assert out["sysctl"] in ("EROFS", "EACCES", "EPERM"), out
    assert out["pid"] == 4 and out["pids"] == [1, 2, 3, 4], out  # init, the job: only its own processes


def test_the_job_keeps_its_exit_status_and_pipes_through_the_reaper():
    with LocalRunner(network="host") as r:
        assert r.run(Job([PY, "-c", "import sys; print('hi'); sys.exit(7)"], {}, timeout_s=30)).returncode == 7
        killed = r.run(Job([PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], {}, timeout_s=30))
        slow = r.run(Job([PY, "-c", "import subprocess, sys; subprocess.run(['sleep', '30'])"], {}, timeout_s=2))
    assert killed.returncode == -9
    assert slow.timed_out and slow.duration_s < 15, (slow.timed_out, slow.duration_s)
    assert leftovers(os.getpid()) == {}  # the namespace's init, its sleep and the reaper: all gone


def test_without_the_layer_a_grandchild_cannot_write_its_own_proc():
    """The reason for the layer: the own-/proc rule alone covers the job's first process only."""
    code = "import errno, os\ntry:\n    open('/proc/self/comm', 'w').write('x')\n    print('ok')\nexcept OSError as e:\n    print(errno.errorcode[e.errno])\n"
    with LocalRunner(network="host") as r:
        res = r.run_under(r.plan.without("private_ns"), Job([PY, "-c", SPAWN, code], {}, timeout_s=30))
    assert res.stdout_tail.split() == ["EACCES"], res.stdout_tail + res.stderr_tail


WARM_ENTRY = textwrap.dedent('''
    import subprocess, sys

    def warm():
        pass

    def main(argv):
        code = ("import os; open('/proc/self/comm', 'w').write('child'); "
                "open('/dev/shm/x', 'w').write('x'); print(os.getpid(), os.listdir('/dev/shm'))")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        print(r.stdout.strip(), r.stderr.strip()[-300:])
        return r.returncode
''')


def test_a_warm_workers_job_gets_the_same_namespaces():
    job = Job([PY, "-I", "-B", "entry.py"], {"entry.py": WARM_ENTRY}, timeout_s=30, entry=PythonEntry("entry.py"))
    with LocalRunner(network="host") as r:
        r.run(job)
        res = r.run(job)
    assert "worker_setup" in res.phase_times, res.phase_times  # forked from the warm worker
    assert res.returncode == 0 and res.stdout_tail.split()[:2] == ["3", "['x']"], res.stdout_tail + res.stderr_tail
    assert leftovers(os.getpid()) == {}

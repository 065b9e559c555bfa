"""After ``kill -9`` of the process that owns a runner, nothing of its job lives on: the watchdog
kills the grandchildren PDEATHSIG cannot reach (a setsid'd daemon of the job included)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from arbor.sandbox.runners.proctree import pid_alive

OWNER = textwrap.dedent("""
    import sys
    from arbor.sandbox.runner import Job
    from arbor.sandbox.runners.local import LocalRunner
    job = Job(argv=[sys.executable, "-c", '''
    import os, subprocess, sys, time
    p = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(300)"])
    print(p.pid, flush=True)
    open("/dev/stdout", "w")
    time.sleep(300)
    '''], files={}, timeout_s=300)
    LocalRunner(filesystem="host").run(job)
""")


def _descendants_with_token(owner_pid: int) -> list[int]:
    found = []
    needle = f"ARBOR_JOB={owner_pid}-".encode()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if needle in open(f"/proc/{d}/environ", "rb").read():
                    found.append(int(d))
            except OSError:
                pass
    return found


def test_kill_9_of_the_owner_kills_the_whole_job_within_seconds():
    owner = subprocess.Popen([sys.executable, "-c", OWNER])
    try:
        deadline = time.time() + 30
        job = []
        while time.time() < deadline and len(job) < 2:  # the job and its setsid'd grandchild
            job = _descendants_with_token(owner.pid)
            time.sleep(0.1)
        assert len(job) >= 2, "the job never started its grandchild"
        os.kill(owner.pid, signal.SIGKILL)  # not reaped yet: the owner stays a zombie meanwhile
        t0 = time.time()
        while time.time() - t0 < 5 and any(pid_alive(p) and _not_zombie(p) for p in job):
            time.sleep(0.1)
        alive = [p for p in job if pid_alive(p) and _not_zombie(p)]
        assert alive == [], f"still alive {time.time() - t0:.1f} s after kill -9: {alive}"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        for p in _descendants_with_token(owner.pid):
            os.kill(p, signal.SIGKILL)


def _not_zombie(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_an_owner_that_still_looks_alive_at_eof_is_waited_for_not_taken_for_a_clean_close():
    """The kernel closes a dying owner's pipe before the owner shows as a zombie; under load the
    watchdog met that moment and left the job running. EOF without the clean-close marker is a
    death: here the owner is still alive at EOF (the widest form of that window) and dies 0.5 s
    later — its job must still be killed."""
    from pathlib import Path

    import arbor.sandbox.runners.watchdog as wd
    from arbor.sandbox.runners.proctree import TOKEN_VAR

    owner = subprocess.Popen(["sleep", "60"])
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                           env={**os.environ, TOKEN_VAR: f"{owner.pid}-watchdogtest"})
    dog = subprocess.Popen([sys.executable, "-I", "-S", str(Path(wd.__file__)), str(owner.pid)],
                           stdin=subprocess.PIPE, start_new_session=True)
    try:
        dog.stdin.close()  # EOF, no marker, the owner alive
        time.sleep(0.5)
        assert dog.poll() is None, "the watchdog took EOF for a clean close and left"
        owner.kill()
        owner.wait()
        job.wait(timeout=10)  # killed by the watchdog's sweep
        assert dog.wait(timeout=10) == 0
    finally:
        for p in (owner, job, dog):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_clean_close_leaves_the_jobs_of_a_live_owner_alone():
    from arbor.sandbox.runners.watchdog import Watchdog

    dog = Watchdog()
    dog.start()
    proc = dog.proc
    dog.close()
    assert proc is not None and proc.returncode == 0

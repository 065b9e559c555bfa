"""The job watchdog: kills what a job left running the moment the Arbor that started it dies.

``PR_SET_PDEATHSIG`` reaches only the job's direct child; after ``kill -9`` of ``arbor run`` a
grandchild (a compiler, a daemon the candidate forked, a ``setsid`` escapee) would live on until
the next run cleaned up. So each local runner starts this small process in its own session,
holding the read end of a pipe whose write end only the runner has. The kernel closes that end
when the runner's process dies, however it dies; the watchdog then kills every process carrying
the dead owner's job token and empties its cgroups (``proctree.cleanup_stale``), a few times over
a second to catch forks in flight. A clean close writes ``CLEAN`` first, and the watchdog just exits.

Why a marker and not "is the owner still alive?": the kernel closes a dying process's files before
the process shows as a zombie, so at EOF a kill -9'd owner can still look alive for a moment, and
the sweeps skip the jobs of an owner that looks alive. Under load (two benchmark campaigns on the
two cores) the watchdog read that moment as a clean close and left a setsid'd grandchild running
(tests/sandbox/runners/test_watchdog.py). Now EOF without the marker is a death: the watchdog waits for
the owner to finish dying, then sweeps.

Run as ``python -I -S watchdog.py`` (stdlib only, proctree loaded by path: no Arbor import, so it
starts in tens of milliseconds).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

_SWEEPS, _SWEEP_GAP_S = 5, 0.2
_EXIT_WAIT_S = 10.0  # for a dying owner to show as a zombie (milliseconds, unless the host is swamped)
CLEAN = b"clean close\n"


class Watchdog:
    """Owned by a runner: ``start`` once, ``close`` when the runner is released."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        if self.proc is not None:
            return
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARBOR_JOB")}
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(Path(__file__)), str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, env=env, close_fds=True)

    def close(self) -> None:
        if self.proc is None:
            return
        try:
            self.proc.stdin.write(CLEAN)  # type: ignore[union-attr]
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def _main(owner: int) -> int:
    import importlib.util

    spec = importlib.util.spec_from_file_location("arbor_proctree", Path(__file__).with_name("proctree.py"))
    proctree = sys.modules["arbor_proctree"] = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(proctree)  # type: ignore[union-attr]
    try:
        got = sys.stdin.buffer.read()  # until EOF; only a clean close writes first
    except OSError:
        got = b""
    if got == CLEAN:  # the runner already killed its jobs
        return 0
    # the owner died; pid_alive is False once it is a zombie (dead, not yet reaped) or gone
    deadline = time.monotonic() + _EXIT_WAIT_S
    while proctree.pid_alive(owner) and time.monotonic() < deadline:
        time.sleep(0.01)
    for _ in range(_SWEEPS):
        proctree.cleanup_stale()
        time.sleep(_SWEEP_GAP_S)
    return 0


if __name__ == "__main__":
    sys.exit(_main(int(sys.argv[1])))

"""The job watchdog: kills what a job left running the moment the Arbor that started it dies.

``PR_SET_PDEATHSIG`` reaches only the job's direct child; after ``kill -9`` of ``arbor run`` a
grandchild (a compiler, a daemon the candidate forked, a ``setsid`` escapee) would live on until
the next run cleaned up. So each local runner starts this small process in its own session,
holding the read end of a pipe whose write end only the runner has. The kernel closes that end
when the runner's process dies, however it dies; the watchdog then kills every process carrying
the dead owner's job token and empties its cgroups (``proctree.cleanup_stale``), a few times over
a second to catch forks in flight. On a clean close it finds the owner alive and just exits.

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
        while sys.stdin.buffer.read(4096):  # nothing is ever written: this returns at EOF
            pass
    except OSError:
        pass
    # _stat is None for a zombie too: a kill -9'd owner is one until its parent reaps it
    if proctree._stat(owner) is not None:  # a clean close: the runner already killed its jobs
        return 0
    for _ in range(_SWEEPS):
        proctree.cleanup_stale()
        time.sleep(_SWEEP_GAP_S)
    return 0


if __name__ == "__main__":
    sys.exit(_main(int(sys.argv[1])))

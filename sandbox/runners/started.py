"""A started job's first process, however the local runner started it — a fresh child
(``Fresh``) or one a warm worker forked (``Warm``) — waited for and reaped through one interface.
"""

from __future__ import annotations

import os
import select
import signal as _signal
import subprocess
from abc import ABC, abstractmethod

from .forkserver import ForkServer, WorkerLost


def wait_exited(proc: subprocess.Popen, timeout: float) -> None:
    """``proc.wait(timeout)`` without its 50 ms polling: a pidfd wakes us the moment it exits."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        proc.wait(timeout=timeout)
        return
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        ready = poller.poll(timeout * 1000)
    finally:
        os.close(fd)
    if not ready:
        raise subprocess.TimeoutExpired(proc.args, timeout)
    proc.wait()



class Started(ABC):
    """A started job's first process, however it was started: ``wait`` (True when it ended),
    ``reap`` after it was killed, its ``returncode`` (Popen's convention) and start-up times."""

    pid: int
    returncode: int | None = None
    phases: dict

    @abstractmethod
    def wait(self, timeout: float) -> bool: ...

    @abstractmethod
    def reap(self) -> None: ...


class Fresh(Started):
    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.pid, self.phases = proc, proc.pid, {}

    def wait(self, timeout: float) -> bool:
        try:
            wait_exited(self.proc, timeout)
        except subprocess.TimeoutExpired:
            return False
        self.returncode = self.proc.returncode
        return True

    def reap(self) -> None:
        self.proc.wait()
        self.returncode = self.proc.returncode


class Warm(Started):
    reap_timeout_s = 10.0  # for the worker to report a killed child's end; then it counts as hung

    def __init__(self, server: ForkServer, pid: int, setup_s: float) -> None:
        self.server, self.pid = server, pid
        self.phases = {"worker_setup": setup_s}

    def wait(self, timeout: float) -> bool:
        done, rc = self.server.wait_exit(timeout)
        if done:
            self.returncode = rc
        return done

    def reap(self) -> None:
        """After the tree was killed: the worker reaps the child and reports it; a worker that
        does not is hung, and is killed (the job's child is dead either way)."""
        try:
            done, rc = self.server.wait_exit(self.reap_timeout_s)
        except WorkerLost:
            done, rc = False, None
        if not done:
            self.server.kill()
            rc = -_signal.SIGKILL
        self.returncode = rc

"""Several measurements in one harness process, each in its own forked child.

Standalone (stdlib only): loaded by path beside the harness. The parent imports torch and the
helper modules once, *runs nothing* (no tensor op, so no OpenMP pool or CUDA context exists to be
broken by ``fork``), then forks one child per measurement. Every candidate therefore still runs in
a process of its own, with its own snapshot, audit and result file: whatever it patches, spawns
or leaks dies with its child (and its process group), and the next candidate starts from the
clean parent. What is saved is the torch import, about a second per candidate.

Per entry ``i`` the parent writes ``status-{i}.json`` (exit status, signal, its own time limit,
duration) next to the child's ``result-{i}.json`` and ``stderr-{i}.txt``, so the protocol can
classify each child's end exactly like a single-measurement job's.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any, Callable


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _wait(pid: int, timeout_s: float) -> dict:
    deadline, timed_out = time.monotonic() + timeout_s, False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            timed_out = True
            _killpg(pid)
            _, status = os.waitpid(pid, 0)
            break
        time.sleep(0.005)
    _killpg(pid)  # anything the candidate left behind in its process group
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return {"returncode": -sig, "signal": sig, "timed_out": timed_out}
    return {"returncode": os.WEXITSTATUS(status), "signal": None, "timed_out": timed_out}


def run(entries: list, measure: Callable[[Any, str], int]) -> int:
    """``measure(request, result_path)`` runs in each child (a request.py ``MeasureRequest``); its
    return value is the exit code."""
    for i, req in enumerate(entries):
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child: own process group, own stderr file, never returns
            code = 1
            try:
                os.setpgid(0, 0)
                fd = os.open(f"stderr-{i}.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                code = measure(req, f"result-{i}.json")
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        status = _wait(pid, float(req.timeout_s or 120))
        status["duration_s"] = time.monotonic() - t0
        with open(f"status-{i}.json", "w", encoding="utf-8") as f:
            json.dump(status, f)
    return 0

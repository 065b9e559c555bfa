"""Lease files and lease tokens: how a server is found again after Arbor itself died.

Every process of a server inherits ``ARBOR_SERVER_LEASE=<token>`` in its environment (workers
that call ``setsid`` and leave the process group keep it), and the token is written to a lease
file with the owner's pid and start time. Finding processes by token — never by name — is what
lets a later run kill exactly what an earlier, ``kill -9``-ed run left behind.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from pathlib import Path

from ..runners.proctree import pid_alive

LEASE_ENV = "ARBOR_SERVER_LEASE"


def default_lease_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"arbor-server-leases-{os.getuid()}"


def _proc_start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def lease_processes(token: str) -> list[int]:
    """PIDs of live processes whose environment carries this lease token."""
    needle = f"{LEASE_ENV}={token}".encode()
    pids = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0") and pid_alive(int(entry.name)):
            pids.append(int(entry.name))
    return pids


def _kill_all(pids: list[int], sig: int = signal.SIGKILL) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _wait_gone(token: str, timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    left = lease_processes(token)
    while left and time.monotonic() < deadline:
        _kill_all(left)
        time.sleep(0.05)
        left = lease_processes(token)
    return left


def cleanup_stale(lease_dir: Path | None = None) -> list[int]:
    """Kill what earlier, dead Arbor processes left running; returns the PIDs it killed.

    A lease whose owner is still alive (another worker) is left alone. Owners are identified by
    pid *and* start time, so a recycled pid never protects an orphan.
    """
    d = lease_dir or default_lease_dir()
    if not d.is_dir():
        return []
    killed: list[int] = []
    for f in sorted(d.glob("*.json")):
        try:
            lease = json.loads(f.read_text())
            token = str(lease["token"])
        except (OSError, ValueError, KeyError, TypeError):
            f.unlink(missing_ok=True)
            continue
        owner, started = lease.get("owner_pid"), lease.get("owner_start")
        if owner == os.getpid() or (owner and pid_alive(owner) and _proc_start_time(owner) == started):
            continue
        pids = lease_processes(token)
        _kill_all(pids)
        if not _wait_gone(token, 5.0):
            f.unlink(missing_ok=True)
        killed.extend(pids)
    return killed

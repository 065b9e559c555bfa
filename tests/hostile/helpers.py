"""Leftover detectors: after a hostile run nothing of it may survive — process, cgroup, workdir,
container."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path


def connections(srv) -> int:  # type: ignore[no-untyped-def]
    """Connections the bait listener accepted (each one is a sandbox escape)."""
    n = 0
    while True:
        try:
            conn, _ = srv.accept()
        except OSError:
            return n
        conn.close()
        n += 1


def job_processes(owner: int) -> list[int]:
    """Live (non-zombie) processes carrying a job token issued by Arbor process ``owner``."""
    needle = f"ARBOR_JOB={owner}-".encode()
    found = []
    for p in Path("/proc").glob("[0-9]*"):
        try:
            if needle in (p / "environ").read_bytes() and "\nState:\tZ" not in (p / "status").read_text():
                found.append(int(p.name))
        except OSError:
            pass
    return found


def leftovers(owner: int, wait_s: float = 3.0) -> dict[str, list]:
    """Everything a job of ``owner`` left behind, after waiting a little for asynchronous exits."""
    deadline = time.monotonic() + wait_s
    while True:
        found = {
            "processes": job_processes(owner),
            "cgroups": [p.name for p in Path("/sys/fs/cgroup/pids").glob(f"arbor-{owner}-*")],
            "workdirs": [p.name for p in Path(tempfile.gettempdir()).glob(f"arbor-job-{owner}-*")],
        }
        if not any(found.values()) or time.monotonic() > deadline:
            return {k: v for k, v in found.items() if v}
        time.sleep(0.1)


def containers(label: str = "arbor.sandbox") -> list[str]:
    import docker

    return [c.name for c in docker.from_env().containers.list(all=True, filters={"label": label})]

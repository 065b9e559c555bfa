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


def job_processes(owner: int, workers: bool = False) -> list[int]:
    """Live (non-zombie) processes carrying a job token issued by Arbor process ``owner``, or the
    token of one of its warm workers: a job forked from a worker shows the worker's environment in
    /proc. The workers themselves (``owner``'s own children) are left out unless ``workers``."""
    needles = f"ARBOR_JOB={owner}-".encode(), f"ARBOR_WORKER={owner}-".encode()
    found = []
    for p in Path("/proc").glob("[0-9]*"):
        try:
            env, status = (p / "environ").read_bytes(), (p / "status").read_text()
            if "\nState:\tZ" in status or not any(n in env for n in needles):
                continue
            if not workers and needles[0] not in env and f"\nPPid:\t{owner}\n" in status:
                continue  # a warm worker of the (live) owner: kept between jobs by design
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

"""Find and kill every process one job started — including ones that tried to get away.

``killpg`` reaches a job's process group, but a candidate that calls ``setsid()`` (or double-forks
into a daemon) leaves the group and is reparented to init: the walking skeleton's runner could
not see it any more. Two mechanisms, the first that works wins:

* **a pids cgroup per job** (cgroup v1 ``pids`` or v2 with pids delegated): membership survives
  setsid and reparenting, ``pids.max`` turns a fork bomb into failing forks, and a cgroup left
  behind by a crashed Arbor is found (its name carries the owner's pid) and emptied next start;
* **/proc scanning**: descendants by parent pid, members of the job's process group or session,
  and any process whose environment carries the job's token (``ARBOR_JOB=<owner pid>-<random>``)
  — the token is what finds a reparented daemon, and, after a crash, every stray of a dead owner.

A job forked from a warm worker (``warm_worker.py``) cannot carry its own token in
``/proc/<pid>/environ`` (that is the environment its process was *executed* with: the worker's),
so the worker carries one of its own (``ARBOR_WORKER=<owner pid>-<random>``): such a job's tree
also takes in every holder of its worker's token but the worker itself, and after a crash the
sweep finds the worker and everything forked from it by that token.

Our own process and its ancestors are never signalled.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ProcessTree", "cleanup_stale", "list_job_processes", "cgroup_available", "TOKEN_VAR", "WORKER_VAR"]

TOKEN_VAR = "ARBOR_JOB"
WORKER_VAR = "ARBOR_WORKER"  # a warm worker's token: it and the jobs forked from it carry it
_CG_PREFIX = "arbor-"
_CG_NAME = re.compile(r"^arbor-(\d+)-[0-9a-f]+$")
_KILL_ROUNDS = 200


def _pids_cgroup_base() -> Path | None:
    """The pids-controller directory of *our* cgroup, where we may create children; None if not."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    v1 = v2 = None
    for ln in lines:
        hid, ctrls, path = ln.split(":", 2)
        if "pids" in ctrls.split(","):
            v1 = path
        elif hid == "0" and ctrls == "":
            v2 = path
    for m in mounts:
        pre, _, post = m.partition(" - ")
        fields, post_f = pre.split(), post.split()
        if len(fields) < 5 or len(post_f) < 3:
            continue
        fstype, opts, mnt = post_f[0], post_f[2], fields[4]
        if v1 is not None and fstype == "cgroup" and "pids" in opts.split(","):
            base = Path(mnt) / v1.lstrip("/")
            return base if os.access(base, os.W_OK) else None
        if v1 is None and v2 is not None and fstype == "cgroup2":
            base = Path(mnt) / v2.lstrip("/")
            try:
                delegated = "pids" in (base / "cgroup.subtree_control").read_text().split()
            except OSError:
                delegated = False
            return base if delegated and os.access(base, os.W_OK) else None
    return None


def cgroup_available() -> bool:
    """Whether jobs get a pids cgroup here (root, or a delegated cgroup v2 subtree)."""
    return _pids_cgroup_base() is not None


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, pgid, sid) of a live process, None if it is gone or a zombie."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    rest = raw[raw.rfind(b")") + 2:].split()
    if not rest or rest[0] in (b"Z", b"X"):
        return None
    return int(rest[1]), int(rest[2]), int(rest[3])


def _has_token(pid: int, needle: bytes) -> bool:
    try:
        return needle in Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False


def _protected() -> set[int]:
    """Us and our ancestors: never signalled, whatever a token scan finds."""
    out, pid = set(), os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        st = _stat(pid)
        pid = st[0] if st else 0
    return out | {0, 1}


def _all_pids() -> list[int]:
    try:
        return [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return []


def list_job_processes(root_pid: int | None, token: str, worker: tuple[str, int] | None = None) -> list[int]:
    """Live processes that belong to a job: descendants, group/session members, token holders.
    ``worker``: (its token, its pid) for a job forked from a warm worker — the worker's other
    token holders are the job's too, the worker (and what it is running on) never."""
    needles = [f"{TOKEN_VAR}={token}".encode() + b"\0"]
    if worker is not None:
        needles.append(f"{WORKER_VAR}={worker[0]}".encode() + b"\0")
    table = {p: st for p in _all_pids() if (st := _stat(p)) is not None}
    found: set[int] = set()
    if root_pid is not None:
        found |= {p for p, (_pp, pg, sid) in table.items() if root_pid in (pg, sid) or p == root_pid}
    children: dict[int, list[int]] = {}
    for p, (pp, _pg, _sid) in table.items():
        children.setdefault(pp, []).append(p)
    spared = {worker[1]} if worker is not None else set()
    found |= {p for p in table if p not in found and p not in spared and any(_has_token(p, n) for n in needles)}
    stack = list(found)
    while stack:
        for c in children.get(stack.pop(), []):
            if c not in found:
                found.add(c)
                stack.append(c)
    return sorted(found - _protected() - spared)


def _kill(pids: list[int]) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@dataclass
class ProcessTree:
    """The processes of one job. ``preexec`` runs in the child; ``kill_all`` after it ends."""

    max_processes: int | None = None
    # True when the job cannot leave its cgroup (Landlock keeps /sys read-only): then the cgroup
    # alone is authoritative and the /proc scan (~20 ms on a busy host) is skipped
    cgroup_is_sealed: bool = False
    token: str = field(default_factory=lambda: f"{os.getpid()}-{secrets.token_hex(8)}")
    cgroup: Path | None = None
    _procs_fd: int = -1
    worker: tuple[str, int] | None = None  # (token, pid) of the warm worker the job is forked from

    def __post_init__(self) -> None:
        base = _pids_cgroup_base()
        if base is None:
            return
        path = base / f"{_CG_PREFIX}{self.token}"
        try:
            path.mkdir()
            if self.max_processes is not None:
                (path / "pids.max").write_text(str(int(self.max_processes)))
            self._procs_fd = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
            self.cgroup = path
        except OSError:
            self._rmdir(path)

    @property
    def mechanism(self) -> str:
        return "cgroup" if self.cgroup is not None else "proc-scan"

    def preexec(self) -> None:
        """Join the job's cgroup before exec, so not even the first fork escapes it."""
        if self._procs_fd >= 0:
            os.write(self._procs_fd, str(os.getpid()).encode())

    def members(self, root_pid: int | None) -> list[int]:
        pids: set[int] = set()
        if self.cgroup is not None:
            try:
                pids = {int(x) for x in (self.cgroup / "cgroup.procs").read_text().split()}
            except OSError:
                self.cgroup_is_sealed = False
        if self.cgroup is None or not self.cgroup_is_sealed:
            pids |= set(list_job_processes(root_pid, self.token, self.worker))
        return sorted(pids - _protected())

    def kill_all(self, root_pid: int | None) -> int:
        """SIGKILL every member until none is left; returns how many distinct pids were killed."""
        killed: set[int] = set()
        if self.cgroup is not None and (self.cgroup / "cgroup.kill").exists():
            try:
                (self.cgroup / "cgroup.kill").write_text("1")
            except OSError:
                pass
        for _ in range(_KILL_ROUNDS):
            pids = self.members(root_pid)
            if not pids:
                break
            killed.update(pids)
            _kill(pids)
            time.sleep(0.005)
        return len(killed)

    def close(self) -> None:
        if self._procs_fd >= 0:
            os.close(self._procs_fd)
            self._procs_fd = -1
        if self.cgroup is not None:
            self._rmdir(self.cgroup)
            self.cgroup = None

    @staticmethod
    def _rmdir(path: Path) -> None:
        for _ in range(100):  # killed tasks leave the cgroup asynchronously
            try:
                path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)


def pid_alive(pid: int) -> bool:
    """Is process ``pid`` running on this host? The one answer to that question in Arbor: the
    store's lease check, the server leases and the stale-job sweeps all ask here.

    A zombie (dead, not yet reaped by its parent) counts as gone — its jobs and leases are
    orphans. A process of another user counts as alive (we may not signal it, but it exists).
    Without procfs, ``kill(pid, 0)`` alone decides."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, OverflowError):  # overflow: no process can have that id
            return False
        except PermissionError:
            return True
        return not Path("/proc").is_dir()


def cleanup_stale() -> int:
    """Kill what jobs of dead Arbor processes left behind (after ``kill -9`` of ``arbor run``).

    Returns the number of processes killed. Cheap enough to call whenever a runner starts.
    """
    killed = 0
    base = _pids_cgroup_base()
    if base is not None:
        try:
            entries = [p for p in base.iterdir() if _CG_NAME.match(p.name)]
        except OSError:
            entries = []
        for path in entries:
            owner = int(_CG_NAME.match(path.name).group(1))  # type: ignore[union-attr]
            if pid_alive(owner):
                continue
            tree = ProcessTree.__new__(ProcessTree)
            tree.max_processes, tree.token, tree.cgroup, tree._procs_fd = None, path.name[len(_CG_PREFIX):], path, -1
            tree.cgroup_is_sealed = False
            killed += tree.kill_all(None)
            tree.close()
    needles = [f"{var}=".encode() for var in (TOKEN_VAR, WORKER_VAR)]
    protected = _protected()
    for pid in _all_pids():
        if pid in protected:
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        for needle in needles:
            i = env.find(needle)
            if i < 0 or (i > 0 and env[i - 1] != 0):
                continue
            m = re.match(rb"(\d+)-", env[i + len(needle):])
            if m and not pid_alive(int(m.group(1))):
                _kill([pid])
                killed += 1
                break
    return killed

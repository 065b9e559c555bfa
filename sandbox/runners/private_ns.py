"""A job's own ``/proc`` and ``/dev/shm``: private PID and mount namespaces, set up in the child.

Why: NVIDIA's driver opens a file of the calling process's own ``/proc/<pid>`` for writing (with
``O_TRUNC``) while ``cuInit`` runs and fails with CUDA error 304 when it cannot (``landlock.py``).
A Landlock rule on the job's own ``/proc/<pid>`` covers the job's first process only: a process it
forks later (Inductor's compile workers, a candidate's multiprocessing, a second CUDA process) has
another ``/proc/<pid>`` that no rule built beforehand can name, and a Landlock domain only ever
narrows. The rule that covers every future process is one on a ``/proc`` directory — which on the
host's procfs would also open every other process of this user (Arbor's ``oom_score_adj``, other
jobs) and, as root, ``/proc/sys`` and ``/proc/sysrq-trigger``.

So the job gets a procfs of its own: ``unshare(CLONE_NEWNS | CLONE_NEWPID)``, one ``fork`` (the
new PID namespace starts with the child), a fresh procfs mounted on ``/proc`` in the private mount
namespace — it lists the job's processes and nobody else's — with every entry that is not a
process (``sys``, ``sysrq-trigger``, ``irq``, ``driver``, ...) bound read-only over itself. Then the
Landlock rule may grant write+truncate beneath that ``/proc``: a job can write its own processes'
entries and nothing else, and Landlock forbids it to undo a mount. ``/dev/shm`` (POSIX shared
memory, semaphores: ``multiprocessing``, torch's shared tensors) becomes a private tmpfs, writable
under the same rules; ``/tmp`` stays the host's, read-only, with ``TMPDIR`` the job's workdir
(``jobio.scrubbed_env``), because the workdir and read paths often live under ``/tmp``.

The process that called ``enter`` stays outside the namespace as a *reaper*: it closes every
descriptor, waits, and exits as the job did, so the pid the runner holds, its exit status and its
resource usage stay the job's. Inside, PID 1 is a small init that mounts, reaps orphans and
reports the job's wait status; the job is PID 2, because PID 1 ignores the signals it sends
itself (``abort()``, a candidate killing itself). When PID 1 ends, the kernel kills the rest of
the namespace: no grandchild outlives its job.

Needs CAP_SYS_ADMIN (root, as on the GPU hosts so far) or unprivileged user namespaces (then a user
namespace mapping only the caller's own uid and gid comes first). ``available()`` tries it once.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from functools import lru_cache

__all__ = ["available", "PrivateNamespaces", "SHM"]

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER = 0x00020000, 0x20000000, 0x10000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_PR_SET_PDEATHSIG, _SIGKILL = 1, 9
_PROC_FLAGS = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
_PROC_LINKS = ("self", "thread-self", "mounts", "net")  # links into the job's own entries
SHM = "/dev/shm"


class PrivateNamespaces:
    """Prepared in the parent (functions resolved, the user's ids read); ``enter`` in the child."""

    def __init__(self, workdir: str) -> None:
        lib = ctypes.CDLL(None, use_errno=True)
        self._unshare, self._mount, self._prctl = lib.unshare, lib.mount, lib.prctl
        self._mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
        self._signal, self._kill = lib.signal, lib.kill
        self.uid, self.gid = os.getuid(), os.getgid()
        self.user_ns = os.geteuid() != 0  # root has CAP_SYS_ADMIN; anyone else needs a user namespace
        # a workdir under /dev/shm would vanish under the private tmpfs: then /dev/shm stays the host's
        self.private_shm = os.path.isdir(SHM) and not os.path.realpath(workdir).startswith(SHM + "/")
        # what the child binds read-only, listed here: the child runs under the job's RLIMIT_AS with
        # the parent's address space, so it allocates as little as it can
        self._proc_entries = [f"/proc/{n}".encode() for n in sorted(os.listdir("/proc"))
                              if not n.isdigit() and n not in _PROC_LINKS and not os.path.islink(f"/proc/{n}")]

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    def _mnt(self, src: bytes | None, target: bytes, fstype: bytes | None, flags: int, data: bytes | None = None) -> None:
        self._check(self._mount(src, target, fstype, flags, data), f"mount {fstype or 'bind'} on {target.decode()}")

    def enter(self) -> None:
        """In the child: returns in PID 2 of a new namespace (the job), the caller's process
        waiting outside as its reaper. Raises when a step fails."""
        flags = CLONE_NEWNS | CLONE_NEWPID | (CLONE_NEWUSER if self.user_ns else 0)
        self._check(self._unshare(flags), "unshare(mount, PID namespaces)")
        if self.user_ns:
            self._map_ids()
        status_r, status_w = os.pipe()
        pid = os.fork()
        if pid != 0:
            os.close(status_w)
            self._reap(pid, status_r)  # never returns
        os.close(status_r)
        self._prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)  # the reaper's end (Arbor's death) is ours
        self._mnt(None, b"/", None, _MS_REC | _MS_PRIVATE)  # nothing below propagates to the host
        self._mnt(b"proc", b"/proc", b"proc", _PROC_FLAGS)
        for path in self._proc_entries:  # everything that is not a process: read-only
            try:
                self._mnt(path, path, None, _MS_BIND | _MS_REC)
            except FileNotFoundError:  # an entry that went away (a module unloading)
                continue
            self._mnt(None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _PROC_FLAGS)
        if self.private_shm:
            self._mnt(b"tmpfs", SHM.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, b"mode=1777")
        job = os.fork()  # PID 2: PID 1 ignores signals it sends itself (abort(), kill -9 of oneself)
        if job != 0:
            self._init(job, status_w)  # never returns
        os.close(status_w)
        self._prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)

    def _map_ids(self) -> None:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{self.uid} {self.uid} 1"),
                           ("gid_map", f"{self.gid} {self.gid} 1")):
            fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
            try:
                os.write(fd, text.encode())
            finally:
                os.close(fd)

    @staticmethod
    def _init(job: int, status_w: int) -> None:
        """PID 1: reap every orphan of the namespace until the job ends, hand the reaper the job's
        wait status, and end — which ends every process left in the namespace."""
        os.closerange(0, status_w)
        os.closerange(status_w + 1, 1 << 20)
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except InterruptedError:
                continue
            except OSError:
                os._exit(1)
            if pid == job:
                os.write(status_w, status.to_bytes(4, "little"))
                os._exit(0)

    def _reap(self, pid: int, status_r: int) -> None:
        """The reaper, outside the namespace: hold nothing of the job's (its pipes must reach EOF
        when the job ends), wait, and end as the job ended — by the same signal, or the same code."""
        os.closerange(0, status_r)
        os.closerange(status_r + 1, 1 << 20)
        got = b""
        while len(got) < 4:
            try:
                chunk = os.read(status_r, 4 - len(got))
            except InterruptedError:
                continue
            if not chunk:
                break
            got += chunk
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
            except OSError:
                os._exit(1)
        if len(got) == 4:  # PID 1 said how the job ended; otherwise PID 1 itself was killed
            status = int.from_bytes(got, "little")
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            self._signal(sig, 0)  # SIG_DFL
            self._kill(os.getpid(), sig)
        os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _probe() -> None:  # the preexec of the availability check
    PrivateNamespaces("/").enter()


@lru_cache(maxsize=1)
def available() -> bool:
    """Whether this process may give a job private PID and mount namespaces. Tried once, in a
    child that sets them up as a job's would and checks that it is PID 2 of its own /proc."""
    if not sys.platform.startswith("linux"):
        return False
    code = ("import os, sys; sys.exit(0 if os.getpid() == 2 and "
            "sorted(n for n in os.listdir('/proc') if n.isdigit()) == ['1', '2'] else 3)")
    try:
        r = subprocess.run([sys.executable, "-I", "-c", code], preexec_fn=_probe, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0

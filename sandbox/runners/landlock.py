"""Landlock rulesets: the kernel's unprivileged access control, one ruleset per job.

A ruleset is built in the parent (paths opened, rules added) and only ``restrict_self`` runs in
the child, after fork: that keeps the child side to one syscall. Which parts a ruleset carries —
filesystem rules, TCP rules, the signal scope, the abstract-unix-socket scope — is the caller's
choice (``isolation.IsolationPlan``), because each part can be tried on its own when a device
driver refuses to start under one of them (``sandbox/gpu/probe.py``).

A job may write its *own* ``/proc/<pid>`` (with truncation): NVIDIA's driver opens a file there
for writing while ``cuInit`` runs and fails with CUDA error 304 ("OS call failed") when it cannot
— found on an H100 host (driver 580, Linux 6.18, ABI 7), where it broke every sandboxed CUDA job
(``scripts/device_probe.py``: the whole plan failed, every plan without the filesystem rules
worked; granting write+truncate beneath the child's own ``/proc/<pid>`` and nothing else made
``cuInit`` succeed). That rule cannot be built in the parent — the path names a process that
does not exist yet — so ``restrict_self`` adds it in the child from ``/proc/self``, a few
syscalls. Writing one's own proc files reaches only oneself; ``/proc/sys``, other processes'
entries and the rest of ``/proc`` stay read-only. Processes the job forks later are not covered by
that rule; where the job has private PID and mount namespaces (``private_ns.py``) the rule is on
its own procfs instead, which holds only the job's processes, and covers them all.

ABI history that matters here: 1 filesystem (Linux 5.13), 2 REFER, 3 TRUNCATE, 4 TCP bind/connect
(6.7), 5 IOCTL_DEV (6.10), 6 scopes: abstract unix sockets and signals (6.12).
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["landlock_abi", "libc", "Ruleset", "FS_ISOLATE", "FS_WRITES"]

_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446  # x86_64 and aarch64 share these
_CREATE_VERSION = 1
_RULE_PATH_BENEATH = 1

# LANDLOCK_ACCESS_FS_* bits
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1

_READ = _EXECUTE | _READ_FILE | _READ_DIR
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV  # valid on non-dirs

FS_ISOLATE = "isolate"  # reads: an allow-list of system paths + the workdir; writes: the workdir
FS_WRITES = "writes"  # reads anywhere; writes: the workdir (and device nodes) only


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@lru_cache(maxsize=1)
def libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@lru_cache(maxsize=1)
def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is missing or disabled."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        v = libc().syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_VERSION))
    except (AttributeError, OSError):
        return 0
    return max(int(v), 0)


def _handled_fs(abi: int) -> int:
    bits = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        bits |= _REFER
    if abi >= 3:
        bits |= _TRUNCATE
    if abi >= 5:
        bits |= _IOCTL_DEV
    return bits


@dataclass
class Ruleset:
    """One job's Landlock ruleset (an fd the child hands to ``landlock_restrict_self``)."""

    fd: int
    abi: int
    own_proc: int = 0  # rights on the child's own /proc/<pid>, added in the child (see module doc)
    fs_bits: int = 0  # the filesystem rights handled: what a private /dev/shm is granted

    @classmethod
    def build(cls, abi: int, *, fs: str | None, workdir: str, read_paths: list[str] | tuple[str, ...] = (),
              tcp: bool = False, scope_signal: bool = False, scope_abstract_unix: bool = False) -> Ruleset | None:
        """Create the ruleset in the parent; None when it would restrict nothing on this kernel.

        ``fs``: ``FS_ISOLATE``, ``FS_WRITES`` or None (no filesystem rules). TCP rules need
        ABI >= 4 and the scopes ABI >= 6; a part the kernel lacks is left out (the plan that asked
        for it already said so in a notice)."""
        if abi < 1:
            return None
        fs_bits = _handled_fs(abi) if fs else 0
        net_bits = (_NET_BIND_TCP | _NET_CONNECT_TCP) if tcp and abi >= 4 else 0
        scoped = ((SCOPE_SIGNAL if scope_signal else 0) | (SCOPE_ABSTRACT_UNIX if scope_abstract_unix else 0)
                  if abi >= 6 else 0)
        if not (fs_bits or net_bits or scoped):
            return None
        attr = _RulesetAttr(fs_bits, net_bits, scoped)
        size = 8 if abi < 4 else (16 if abi < 6 else 24)
        fd = libc().syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"landlock_create_ruleset: {os.strerror(err)}")
        if fs_bits:
            rules = [(p, fs_bits & _READ) for p in (read_paths if fs == FS_ISOLATE else ["/"])]
            rules.append((workdir, fs_bits))
            if os.path.exists("/dev"):  # GPU drivers open, write and ioctl device nodes
                rules.append(("/dev", fs_bits & (_READ | _WRITE_FILE | _IOCTL_DEV)))
            try:
                for path, access in rules:
                    cls._add(fd, path, access)
            except OSError:
                os.close(fd)
                raise
        return cls(fd, abi, own_proc=fs_bits & (_WRITE_FILE | _TRUNCATE), fs_bits=fs_bits)

    @staticmethod
    def _add(ruleset_fd: int, path: str, access: int) -> None:
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return  # a path that vanished is simply not granted
        try:
            if not os.path.isdir(path):
                access &= _FILE_RIGHTS
            rule = _PathBeneathAttr(access, pfd)
            if libc().syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset_fd), ctypes.c_int(_RULE_PATH_BENEATH),
                              ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
        finally:
            os.close(pfd)

    def restrict_self(self, private_proc: bool = False, shm: str | None = None) -> None:
        """Called in the child after fork. Needs no_new_privs (set by the caller).

        ``private_proc``: ``/proc`` is the job's own procfs (``private_ns.py``), so the write rule
        covers all of it — every process the job will have — instead of this process's entry.
        ``shm``: a private tmpfs there, granted like the workdir."""
        if self.own_proc and private_proc:
            self._add(self.fd, "/proc", (self.fs_bits & _READ) | self.own_proc)  # a new procfs: not the parent's rule
        elif self.own_proc:
            self._add(self.fd, "/proc/self", self.own_proc)  # /proc/self opens as this process's /proc/<pid>
        if shm and self.fs_bits:
            self._add(self.fd, shm, self.fs_bits)
        if libc().syscall(_SYS_RESTRICT, ctypes.c_int(self.fd), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

"""Kernel-level isolation for the local runner: Landlock, a private network namespace, prctl.

A candidate runs as the same user as Arbor, so rlimits alone leave it free to read ``~/.ssh``,
``/proc/<arbor>/environ`` (the API keys we scrubbed from *its* environment), to open sockets, and
to ``kill`` Arbor itself. Two unprivileged kernel features close most of that without Docker:

* **Landlock** (Linux >= 5.13): the child may read only the interpreter, system libraries and its
  own workdir, may write only its workdir, may not connect or bind TCP (ABI >= 4), and may not
  signal or ptrace processes outside its domain (ABI >= 6) — so "kill your parent" and
  "read the parent's environ" fail with EPERM.
* **A new network namespace** (``unshare(CLONE_NEWNET)``, root only): no interfaces but a
  down loopback, so UDP and raw sockets fail too.

Everything here is probed once per process and degrades to a *notice* (shown by the campaign as
a warning event), never to an error: a laptop without Landlock still runs campaigns.

The ruleset is built in the parent (opening paths, allocating) and only ``landlock_restrict_self``
runs between fork and exec, keeping the preexec hook to async-signal-safe-ish syscalls.
"""

from __future__ import annotations

import ctypes
import os
import site
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["Landlock", "landlock_abi", "netns_available", "libc", "PR_SET_PDEATHSIG",
           "PR_SET_NO_NEW_PRIVS", "CLONE_NEWNET", "default_read_paths",
           "make_capability_dropper"]

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
CLONE_NEWNET = 0x40000000
_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446  # x86_64 and aarch64 share these
_CREATE_VERSION = 1
_RULE_PATH_BENEATH = 1

# LANDLOCK_ACCESS_FS_* bits
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REMOVE_DIR, _REMOVE_FILE, _MAKE_CHAR, _MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
_MAKE_REG, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
_MAKE_SYM, _REFER, _TRUNCATE, _IOCTL_DEV = 1 << 12, 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1

_READ = _EXECUTE | _READ_FILE | _READ_DIR
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV  # valid on non-dirs


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@lru_cache(maxsize=1)
def libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def cap_last_cap() -> int:
    try:
        return int(open("/proc/sys/kernel/cap_last_cap").read())
    except (OSError, ValueError):
        return 40


def make_capability_dropper():  # type: ignore[no-untyped-def]
    """A child-side function that makes sure ``execve`` grants root *no* capabilities.

    Landlock's ptrace scoping is bypassed by CAP_SYS_PTRACE, and a root child could read
    ``/proc/<arbor>/environ`` or signal anything; an empty bounding set plus cleared inheritable
    and ambient sets leave it uid 0 (so root-owned interpreters still load) but powerless.
    """
    lib = libc()
    prctl, capget, capset = lib.prctl, lib.capget, lib.capset
    last = cap_last_cap()
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()

    def drop() -> None:
        for cap in range(last + 1):
            prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
        prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        if capget(ctypes.byref(header), data) == 0:
            data[0].inheritable = data[1].inheritable = 0
            capset(ctypes.byref(header), data)

    return drop


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


def default_read_paths() -> list[str]:
    """What a Python child needs to start: the interpreter prefix, site-packages, system libs.

    /etc is limited to the files the dynamic loader and libc read; /proc is readable (torch reads
    cpuinfo and its own maps) but other processes' environ/mem stay closed by Landlock's ptrace
    scoping. /dev and /sys are readable for GPU drivers; /dev is also writable (device nodes).
    """
    paths = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/opt", "/proc", "/sys",
             "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
             "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/os-release",
             "/etc/alternatives", "/etc/ssl/certs", "/etc/OpenCL", "/etc/vulkan",
             sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    try:
        paths += site.getsitepackages()
    except AttributeError:  # virtualenvs built by old tools
        pass
    return list(dict.fromkeys(p for p in paths if p and os.path.exists(p)))


@dataclass
class Landlock:
    """A ruleset for one job: read-only system paths, a read-write workdir, no TCP, scoped signals."""

    fd: int
    abi: int

    @classmethod
    def build(cls, workdir: str, read_paths: list[str], write_paths: list[str] = ()) -> Landlock | None:
        """Create the ruleset in the parent; None when this kernel has no Landlock."""
        abi = landlock_abi()
        if abi < 1:
            return None
        fs = _handled_fs(abi)
        attr = _RulesetAttr(fs, (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0,
                            (_SCOPE_SIGNAL | _SCOPE_ABSTRACT_UNIX) if abi >= 6 else 0)
        size = 8 if abi < 4 else (16 if abi < 6 else 24)
        fd = libc().syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
        if fd < 0:
            return None
        rules = [(p, fs & _READ) for p in read_paths]
        rules += [(p, fs) for p in (workdir, *write_paths)]
        if os.path.exists("/dev"):
            rules.append(("/dev", fs & (_READ | _WRITE_FILE | _IOCTL_DEV)))
        try:
            for path, access in rules:
                cls._add(fd, path, access)
        except OSError:
            os.close(fd)
            raise
        return cls(fd, abi)

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

    def restrict_self(self) -> None:
        """Called in the child between fork and exec. Needs no_new_privs (set by the caller)."""
        if libc().syscall(_SYS_RESTRICT, ctypes.c_int(self.fd), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    @property
    def scopes_signals(self) -> bool:
        return self.abi >= 6

    @property
    def blocks_tcp(self) -> bool:
        return self.abi >= 4


def _probe_netns() -> None:
    if libc().unshare(CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare")


@lru_cache(maxsize=1)
def netns_available() -> bool:
    """Whether this process may give a child its own (empty) network namespace. Checked once."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        r = subprocess.run([sys.executable, "-I", "-c", "pass"], preexec_fn=_probe_netns,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0

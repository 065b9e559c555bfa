"""A seccomp filter that takes the network away: no IPv4, IPv6 or packet sockets, no io_uring.

It stands in for the private network namespace where that namespace cannot be had (no root) or
breaks a device driver (``sandbox/gpu/probe.py``): ``socket(AF_INET | AF_INET6 | AF_PACKET, ...)``
fails with EPERM, so neither TCP nor UDP nor raw traffic can start, whatever the address.
``io_uring_setup`` is refused too, because io_uring can create sockets (IORING_OP_SOCKET) without
the ``socket`` syscall this filter sees. Unix sockets stay: Python, torch and the CUDA driver use
them locally; abstract ones are the Landlock scope's business.

Classic BPF over ``struct seccomp_data`` (nr at 0, arch at 4, args[0] at 16; little-endian on
both supported architectures). The filter checks the architecture first: a syscall made through
another ABI (i386 ``int 0x80``, AArch32) carries other numbers this filter cannot judge, so it
ends the process; x32 syscalls on x86_64 (numbers with bit 30 set) are refused. Installing it
needs no_new_privs, which every sandboxed child sets anyway.

The program is assembled in the parent; ``install`` is one ``prctl`` in the child.
"""

from __future__ import annotations

import ctypes
import platform
import struct
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache

from .landlock import libc

__all__ = ["NetworkFilter", "seccomp_available", "ARCHES", "BLOCKED_FAMILIES"]

PR_GET_SECCOMP, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 21, 22, 2
PR_SET_NO_NEW_PRIVS = 38
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K, _JGE_K = 0x15, 0x35  # BPF_JMP | BPF_JEQ/JGE | BPF_K
_RET_K = 0x06
_RET_KILL_PROCESS, _RET_ERRNO, _RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
_EPERM = 1
_X32_BIT = 0x40000000

AF_INET, AF_INET6, AF_PACKET = 2, 10, 17
BLOCKED_FAMILIES = (AF_INET, AF_INET6, AF_PACKET)


@dataclass(frozen=True)
class Arch:
    audit_arch: int
    socket: int
    io_uring_setup: int
    x32: bool  # syscalls with bit 30 set come from the x32 ABI


ARCHES = {
    "x86_64": Arch(0xC000003E, 41, 425, True),
    "aarch64": Arch(0xC00000B7, 198, 425, False),
}


def _assemble(arch: Arch) -> list[tuple[int, int, int, int]]:
    """The program as (code, jt, jf, k), jumps resolved from labels."""
    prog: list[tuple] = [
        (_LD_W_ABS, 0, 0, 4),
        (_JEQ_K, "+1", 0, arch.audit_arch),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),
        (_LD_W_ABS, 0, 0, 0),
    ]
    if arch.x32:
        prog.append((_JGE_K, "deny", 0, _X32_BIT))
    prog += [
        (_JEQ_K, 0, "not_socket", arch.socket),
        (_LD_W_ABS, 0, 0, 16),  # args[0]: the address family (an int: the low word)
        *[(_JEQ_K, "deny", 0, family) for family in BLOCKED_FAMILIES],
        (_RET_K, 0, 0, _RET_ALLOW),
        ("not_socket",),
        (_JEQ_K, "deny", 0, arch.io_uring_setup),
        (_RET_K, 0, 0, _RET_ALLOW),
        ("deny",),
        (_RET_K, 0, 0, _RET_ERRNO | _EPERM),
    ]
    labels, out = {}, []
    for ins in prog:
        if len(ins) == 1:
            labels[ins[0]] = len(out)
        else:
            out.append(ins)
    resolved = []
    for i, (code, jt, jf, k) in enumerate(out):
        def target(j):  # type: ignore[no-untyped-def]
            if isinstance(j, int):
                return j
            if j.startswith("+"):
                return int(j[1:])
            return labels[j] - i - 1
        resolved.append((code, target(jt), target(jf), k))
    return resolved


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _machine() -> str:
    return platform.machine()


class NetworkFilter:
    """The assembled program, kept alive in the parent until the child has installed it."""

    def __init__(self, machine: str | None = None) -> None:
        arch = ARCHES.get(machine or _machine())
        if arch is None:
            raise OSError(f"seccomp network filter: no syscall table for {machine or _machine()}")
        ins = _assemble(arch)
        self._filters = (_SockFilter * len(ins))(*[_SockFilter(*i) for i in ins])
        self._prog = _SockFprog(len(ins), self._filters)
        self._prctl = libc().prctl

    @property
    def instructions(self) -> list[tuple[int, int, int, int]]:
        return [(f.code, f.jt, f.jf, f.k) for f in self._filters]

    def bytes(self) -> bytes:
        return b"".join(struct.pack("<HBBI", *i) for i in self.instructions)

    def install(self) -> None:
        """In the child, after no_new_privs: from here on no network socket can be created."""
        if self._prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self._prog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


_CHECK = ("import socket,sys\ntry:\n    socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
          "except PermissionError:\n    sys.exit(0)\nsys.exit(3)\n")


@lru_cache(maxsize=1)
def seccomp_available() -> bool:
    """Whether a child can install the network filter here, and it refuses a UDP socket. Checked
    once, by doing it: a kernel without CONFIG_SECCOMP_FILTER, an unknown architecture or a
    sandbox that refuses new filters all answer no."""
    if not sys.platform.startswith("linux") or _machine() not in ARCHES:
        return False
    try:
        filt = NetworkFilter()
    except OSError:
        return False
    prctl = libc().prctl

    def child() -> None:
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        filt.install()

    try:
        r = subprocess.run([sys.executable, "-I", "-S", "-c", _CHECK], preexec_fn=child, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0

"""One host-allocator behaviour for every measurement process, so a tensor's allocation costs the same in every run.

Standalone (stdlib only): loaded by path by the harnesses before torch is imported.

Why: glibc's malloc serves blocks of 128 KiB and more from ``mmap`` and returns them on ``free``, so
every call that allocates such a tensor page-faults it in again (zeroing included) — unless the
dynamic threshold has moved. glibc raises the threshold to the size of the last freed mmapped block
(up to 32 MiB), after which the same tensors come from the heap and are reused without a fault.
Whether and when that happens depends on the order of earlier allocations in the process.
``python -m benchmarks.host_allocator`` (2026-11-26, 6 measurements per cell, load 3): the Swish
reference (26 MB tensors, one thread) read 34.6 ms median with a max/min of 5.9 over fresh harness
processes (some took 5.5 ms); a compiled RMSNorm read 2.23x in forked batch children and 1.34x in
fresh processes; conv+avgpool+hardswish's reference spread 2.5x. Pinned: max/min 1.08-1.32, and
batch and single agree (1.31x / 1.35x). Tensors above 32 MiB fault on every call whatever happens
(a 60 MB Swish: 62 ms, 9 ms without the faults).

So every measurement pins the behaviour a device caching allocator has (PyTorch's CUDA allocator
keeps freed blocks for reuse): no ``mmap`` for the heap (``M_MMAP_MAX=0``) and no trimming of it
(``M_TRIM_THRESHOLD`` at its maximum), which also disables the dynamic threshold. Freed tensors are
reused; the process keeps its peak memory until it exits, which a one-measurement process does at
once. Where the C library is not glibc nothing is changed and the fingerprint says so; the Critic's
env gate rejects a comparison between the two behaviours.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

__all__ = ["PINNED", "pin", "pinned", "set_pinned"]

PINNED = "glibc:no-mmap,no-trim"
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc <malloc.h>
_TRIM_MAX = 2**31 - 1  # mallopt takes an int
_DEFAULTS = ((_M_MMAP_MAX, 65536), (_M_TRIM_THRESHOLD, 128 * 1024))  # glibc's own (mallopt(3))
_PROBE_BYTES = 40 << 20  # above the largest threshold glibc's dynamic mmap threshold reaches (32 MiB)
_libc = None
answer = "not pinned"  # what pin() last said: the fingerprint's ``host_allocator``


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _glibc():  # type: ignore[no-untyped-def]
    """glibc with its functions typed; None elsewhere. ``mallinfo2`` (the probe's) only exists from
    glibc 2.33: older ones (Ubuntu 20.04 images) still pin, without the probe."""
    global _libc
    if _libc is None:
        _libc = False
        if platform.libc_ver()[0] == "glibc":
            try:
                lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                lib.mallopt.argtypes, lib.mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
                lib.malloc.argtypes, lib.malloc.restype = (ctypes.c_size_t,), ctypes.c_void_p
                lib.free.argtypes, lib.free.restype = (ctypes.c_void_p,), None
                _libc = lib
            except (OSError, AttributeError):
                pass
            if _libc and hasattr(_libc, "mallinfo2"):
                _libc.mallinfo2.argtypes, _libc.mallinfo2.restype = (), _MallInfo2
    return _libc or None


def pin() -> str:
    """Pin the behaviour; returns (and keeps in ``answer``) what the fingerprint records."""
    global answer
    libc = _glibc()
    if libc is None:
        answer = f"system ({platform.libc_ver()[0] or 'not glibc'}): unpinned"
    elif libc.mallopt(_M_MMAP_MAX, 0) != 1 or libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_MAX) != 1:
        answer = "glibc: mallopt refused, unpinned"
    else:
        answer = PINNED
    return answer


def pinned() -> bool | None:
    """Whether the behaviour is still pinned, by probe (mallopt has no getter): a 40 MB block must
    come from the heap (no new mmapped block) and stay there when freed (the heap does not shrink).
    A candidate that turns either back on makes every reference call page-fault its tensors in
    again (reward hack #7b); ``process_state`` flags the change and restores it for the reference.
    Cheap once pinned: the block is reused from the heap, never touched. None: nothing to probe."""
    libc = _glibc()
    if libc is None or not hasattr(libc, "mallinfo2"):
        return None
    before = libc.mallinfo2()
    block = libc.malloc(_PROBE_BYTES)
    if not block:
        return None
    held = libc.mallinfo2()
    libc.free(block)
    after = libc.mallinfo2()
    return held.hblks == before.hblks and after.arena >= held.arena


def set_pinned(on: bool) -> None:
    libc = _glibc()
    if libc is None:
        return
    if on:
        pin()
    else:
        for param, value in _DEFAULTS:
            libc.mallopt(param, value)

"""The names a generated C++ candidate binds and the flags its extension is built with (shared by
``source.py``, which writes the candidate, and ``schedule.py``, which rewrites its schedule)."""

from __future__ import annotations

import hashlib

KERNEL = "_arbor_cpu_kernel"
LAUNCHER = "_arbor_fused"
SOURCE = "_ARBOR_CPP"
EXTENSION = "_arbor_ext"
FLAGS = ("-O3", "-march=native", "-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math", "-freciprocal-math")


def extension_name(kernel: str) -> str:
    """A name per source: load_inline keeps one module per name in a process."""
    return "arbor_fused_" + hashlib.sha256(kernel.encode()).hexdigest()[:16]

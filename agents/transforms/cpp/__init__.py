"""Generated C++ CPU kernels from ModelNew's traced graph (docs/architecture.md#parts).

``cpp_codegen`` (``move.py``) is the CPU backend of the region code generator: the region, plan
and splice are the Triton generator's (``../triton``), the kernel is vectorised C++ over torch's
intra-op threads (``source.py``), its math translated from the plan's expressions (``expr.py``) over
the vectorisable functions of ``math.py``.
"""

from __future__ import annotations

from . import move, schedule  # noqa: F401  (registers the transforms)
from .move import explain, generate

__all__ = ["explain", "generate"]

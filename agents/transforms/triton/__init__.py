"""Generated Triton kernels from ModelNew's traced graph (issue 26; docs/architecture.md#parts).

``triton_codegen`` (``move.py``) turns the elementwise / row-reduction region that ends at the
model's output — softmax, log-softmax, layer and RMS norms, logsumexp, sums, means, max/min,
variances over contiguous dims, and the activations and affine epilogues around them — into one
``@triton.jit`` kernel plus the function launching it: ``region.py`` matches the region on the
torch.fx trace and lowers it to a plan (``plan.py``; the op table in ``ops.py``, the reduction
lowerings in ``reductions.py``, what a lowering sees in ``lowerer.py``), ``source.py`` emits the
kernel. Block size and warps are the move's params.
"""

from __future__ import annotations

from . import move, schedule  # noqa: F401  (registers the transforms)
from .move import explain, generate
from .plan import Unsupported

__all__ = ["Unsupported", "explain", "generate"]

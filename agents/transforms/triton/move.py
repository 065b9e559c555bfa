"""``triton_codegen``: ModelNew's elementwise/row-reduction tail as one generated Triton kernel.

The candidate is traced (``graph/trace.py``: meta device, nothing allocated), its output region is
matched (``region.py``) and lowered, and the new module keeps everything before the region in
torch (FX's own code for the prefix: the GEMM, the conv, views) and launches the kernel for the
rest. The forward always launches the kernel: there is no branch back to the reference's ops
(a silent fallback is a reward hack, docs/integrity.md), and a device the kernel cannot run on is
an error the harness reports, not a slower correct answer.

Refused (``None``) when the graph cannot be traced, the region is not one the kernels model
exactly, the module already defines the generated names, or the code would depend on the
problem's sizes (traced again at half size, the whole module must come out identical).
"""

from __future__ import annotations

import ast
import math

from ..base import register
from ..graph.trace import Traced
from .plan import Unsupported
from .region import match
from .source import KERNEL, LAUNCHER, kernel_source, launcher_source
from .splice import forward_calling, size_independent, splice

BLOCKS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
WARPS = (1, 2, 4, 8, 16, 32)
# The longest row one program keeps in registers (16 warps x 32 lanes x 32 values): a row up to
# this long is read once by a block that holds it, so a shorter block — which walks the row once
# per group of dependent reductions and once more to store (softmax: 3 reads instead of 1) — is
# never the move to try. On an H100 the suite's softmax (rows of 8192) ran 0.78x eager with blocks
# of 1024, the first move tried, and its budget ended before the block that holds a row.
HELD_ROW_MAX = 16384


def validate(params: dict) -> None:
    unknown = set(params) - {"block", "num_warps"}
    if unknown:
        raise ValueError(f"unknown params {sorted(unknown)}; triton_codegen takes block and num_warps")
    if params.get("block") not in BLOCKS:
        raise ValueError(f"block must be a power of two in {BLOCKS[0]}..{BLOCKS[-1]}, got {params.get('block')!r}")
    if params.get("num_warps") not in WARPS:
        raise ValueError(f"num_warps must be one of {WARPS}, got {params.get('num_warps')!r}")


def _parts(traced: Traced, block: int, num_warps: int, as_move: bool = False) -> tuple[ast.FunctionDef, str, str]:
    """(new forward, kernel source, launcher source) for a traced candidate. ``as_move``: refuse a
    block that a block holding the row in registers makes pointless (the generator itself writes
    the looped kernel for any block: rows longer than ``HELD_ROW_MAX`` need it)."""
    m = match(traced.gm)
    if as_move and m.mode == "row" and m.plan.reduce_lo is not None:
        row = math.prod(m.shape[m.plan.reduce_lo:])
        if block < row <= HELD_ROW_MAX:
            raise Unsupported(f"rows of {row} would be walked in blocks of {block}, several passes over memory, "
                              f"where a block of {1 << (row - 1).bit_length()} or more holds a row in registers and reads it once")
    return forward_calling(traced, m, LAUNCHER), kernel_source(m), launcher_source(m, block, num_warps)


def _render(traced: Traced, fn: ast.FunctionDef, kernel: str, launcher: str) -> str:
    return splice(traced, fn, kernel + "\n\n" + launcher, {KERNEL, LAUNCHER, "triton", "tl"},
                  (("torch", "import torch"), ("triton", "import triton"), ("tl", "import triton.language as tl")))


def generate(source: str, block: int, num_warps: int, as_move: bool = False) -> str:
    """The candidate with its output region as a Triton kernel; Unsupported (reason) otherwise."""
    traced, (fn, kernel, launcher) = size_independent(
        source, lambda t: _parts(t, block, num_warps, as_move), lambda t: _parts(t, block, num_warps))
    return _render(traced, fn, kernel, launcher)


def explain(source: str, block: int | None = None) -> str | None:
    """Why the move does not apply to ``source`` (None when it does): for tests and the docs.
    Without ``block`` the answer is about the graph only; with one, about that move."""
    try:
        generate(source, block or 1024, 4, as_move=block is not None)
    except Unsupported as exc:
        return str(exc)
    return None


@register("triton_codegen", validate=validate)
def triton_codegen(source: str, params: dict) -> str | None:
    """ModelNew's output region as one generated ``@triton.jit`` kernel (block, num_warps)."""
    validate(params)
    try:
        return generate(source, int(params["block"]), int(params["num_warps"]), as_move=True)
    except Unsupported:
        return None
    except Exception:  # noqa: BLE001 - a graph the matcher cannot read: the move does not apply
        return None

"""Graph-level moves: rewrites read from the traced torch.fx graph of ModelNew (with shapes).

``graph_rewrite`` runs named passes to a fixed point and emits a plain ModelNew source. Passes:
``size1`` (reductions/softmaxes/pools over size-1 dims), ``transposes`` (cancelling pairs),
``diag`` (diag(v) @ B as a broadcast), ``affine`` (scalar/per-channel epilogues folded into
Linear/Conv weights), ``linear_reduction`` (sum/mean over a Linear's outputs as a GEMV),
``scale_operand`` (a scalar multiply of a matmul's result applied to its smaller operand),
``activations`` (hand-written activations recognised by value and replaced by the fused op);
operator choice: ``addmm`` (matmul + add as addmm/baddbmm), ``norms`` (hand-written layer/RMS
norms recognised by value as the native op), ``channels_last`` (NHWC input for 2-D convs),
``lt_epilogue`` (Linear + ReLU / tanh GELU as one cuBLASLt epilogue GEMM: CUDA skills only).

This package's ``__init__`` only *declares* the family's transforms (names, params, validators):
the passes need torch at import time, so ``rewrite.py`` (``graph_rewrite``) and ``epilogue.py``
(``compile_epilogue``) are imported on a move's first call, never by loading skills or reading a
store (``base.declare``).
"""

from __future__ import annotations

from ..base import declare

PASS_NAMES = ("size1", "transposes", "diag", "affine", "linear_reduction", "scale_operand", "activations",
              "addmm", "norms", "channels_last", "lt_epilogue")
EPILOGUE_MODES = ("default", "max-autotune-no-cudagraphs")


def validate_passes(params: dict) -> None:
    """``graph_rewrite``'s params: exactly ``passes``, a non-empty list of known pass names."""
    unknown = set(params) - {"passes"}
    passes = params.get("passes")
    if unknown or not isinstance(passes, list) or not passes:
        raise ValueError("graph_rewrite needs exactly one param, passes: a non-empty list of pass names")
    bad = [p for p in passes if p not in PASS_NAMES]
    if bad:
        raise ValueError(f"unknown passes {bad}; known: {', '.join(sorted(PASS_NAMES))}")


def validate_epilogue(params: dict) -> None:
    """``compile_epilogue``'s params: at most ``mode``, one of ``EPILOGUE_MODES``."""
    if set(params) - {"mode"} or params.get("mode", "default") not in EPILOGUE_MODES:
        raise ValueError("compile_epilogue takes only mode: default or max-autotune-no-cudagraphs")


declare("graph_rewrite", f"{__name__}.rewrite", validate=validate_passes)
declare("compile_epilogue", f"{__name__}.epilogue", validate=validate_epilogue)

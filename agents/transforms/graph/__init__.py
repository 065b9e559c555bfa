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
"""

from __future__ import annotations

from ..base import register
from . import activations, algebra, epilogue, folding, norms, operators  # noqa: F401  (epilogue registers a transform)
from .emit import rewrite_source

PASSES = {
    "size1": algebra.size1_reductions,
    "transposes": algebra.cancel_transposes,
    "diag": algebra.diag_matmul,
    "affine": folding.fold_affine,
    "linear_reduction": folding.fold_linear_reduction,
    "scale_operand": folding.scale_smaller_operand,
    "activations": activations.fuse_activations,
    "addmm": operators.fuse_bias_add,
    "norms": norms.native_norms,
    "channels_last": operators.conv_channels_last,
    "lt_epilogue": operators.lt_epilogue,
}
MAX_ROUNDS = 6


def _validate(params: dict) -> None:
    unknown = set(params) - {"passes"}
    passes = params.get("passes")
    if unknown or not isinstance(passes, list) or not passes:
        raise ValueError("graph_rewrite needs exactly one param, passes: a non-empty list of pass names")
    bad = [p for p in passes if p not in PASSES]
    if bad:
        raise ValueError(f"unknown passes {bad}; known: {', '.join(sorted(PASSES))}")


def run_passes(names: list[str]):  # type: ignore[no-untyped-def]
    def run(rw) -> int:  # type: ignore[no-untyped-def]
        total = 0
        for _ in range(MAX_ROUNDS):
            changed = 0
            for name in names:
                done = PASSES[name](rw)
                if done:
                    rw.refresh()
                changed += done
            if not changed:
                break
            total += changed
        return total

    return run


@register("graph_rewrite", validate=_validate)
def graph_rewrite(source: str, params: dict) -> str | None:
    """Rewrite ModelNew through its traced graph with ``passes``; None when nothing applies.

    Exact up to floating-point rounding. Refused (None) when the candidate cannot be traced
    (data-dependent control flow, a compiled candidate), when the new code would depend on a
    constant captured at trace time, or when the rewrite is valid only at the traced sizes.
    """
    _validate(params)
    try:
        out = rewrite_source(source, run_passes(list(params["passes"])))
    except Exception:  # noqa: BLE001 - a graph the passes cannot handle: the move does not apply
        return None
    return out[0] if out else None

"""``graph_rewrite``: the named passes of this family run to a fixed point on ModelNew's traced graph.

Imported on the move's first call (declared in ``__init__``: the passes import torch).
"""

from __future__ import annotations

from ..base import register
from . import PASS_NAMES, activations, algebra, folding, norms, operators, validate_passes
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
if tuple(PASSES) != PASS_NAMES:  # the declared names are what skills are validated against
    raise RuntimeError("graph passes and PASS_NAMES in agents/transforms/graph/__init__.py differ")
MAX_ROUNDS = 6
_validate = validate_passes


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

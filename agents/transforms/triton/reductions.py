"""How each reduction-family op becomes plan values: sums, means, extremes, and the composites
built from row reductions (logsumexp, var/std, softmax, layer and RMS norm).

Kept apart from the op table (``ops.py``: which ops a kernel supports, over which dims, and the
dispatch) because this is where the numerics live: softmax is a max, an exp, a sum and a division;
a variance is a mean pass and then the centred sum of squares (two passes, as accurate as
PyTorch's); logsumexp guards an all ``-inf`` row like PyTorch. A lowering raises ``Unsupported``
for an argument it does not model (``dtype=``, a non-literal ``keepdim``), never approximates.
"""

from __future__ import annotations

from typing import Callable

from ..graph.nodes import arg, is_number, op_name
from .lowerer import Lowerer
from .plan import Plan, Unsupported, literal

__all__ = ["REDUCTIONS", "softmax_of", "layer_norm_of", "rms_norm_of", "eps_of"]


def _keepdim(node, index: int) -> bool:  # type: ignore[no-untyped-def]
    keep = arg(node, index, "keepdim", False)
    if not isinstance(keep, bool):
        raise Unsupported("keepdim must be a literal")
    return keep


def _no_dtype(node) -> None:  # type: ignore[no-untyped-def]
    if node.kwargs.get("dtype") is not None:
        raise Unsupported("a reduction with dtype=")


def _sum(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
    _no_dtype(node)
    return low.plan.reduce("sum", low.tensor(node, 0, "input"), _keepdim(node, 2))


def _mean(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
    _no_dtype(node)
    s = low.plan.reduce("sum", low.tensor(node, 0, "input"), _keepdim(node, 2))
    return low.plan.op("({0} / {1})", s, "R")


def _extreme(kind: str) -> Callable:
    def lower(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
        return low.plan.reduce(kind, low.tensor(node, 0, "input"), _keepdim(node, 2))
    return lower


def _logsumexp_of(plan: Plan, x: str, keep: bool) -> str:
    m = plan.reduce("max", x, True)
    safe = plan.op("tl.where({0} == float('-inf'), 0.0, {0})", m)  # an all -inf row: -inf, not nan
    s = plan.reduce("sum", plan.op("tl.exp({0} - {1})", x, safe), True)
    return plan.row_view(plan.op("({0} + tl.log({1}))", safe, s), keep)


def _logsumexp(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
    return _logsumexp_of(low.plan, low.tensor(node, 0, "input"), _keepdim(node, 2))


def _var_args(node) -> tuple[float, bool]:  # type: ignore[no-untyped-def]
    """(correction, keepdim) of var/std in any of their spellings."""
    correction, keep = 1.0, False
    if len(node.args) > 2 and isinstance(node.args[2], bool):  # var(x, dim, unbiased, keepdim)
        correction = 1.0 if node.args[2] else 0.0
        keep = bool(node.args[3]) if len(node.args) > 3 else bool(node.kwargs.get("keepdim", False))
    elif len(node.args) > 2:
        raise Unsupported("var/std with positional arguments that are not (dim, unbiased, keepdim)")
    else:
        keep = node.kwargs.get("keepdim", False)
    if "unbiased" in node.kwargs:
        correction = 1.0 if node.kwargs["unbiased"] else 0.0
    if node.kwargs.get("correction") is not None:
        correction = node.kwargs["correction"]
    if not (is_number(correction) and isinstance(keep, bool)):
        raise Unsupported("var/std with a non-literal correction or keepdim")
    return float(correction), keep


def _centred_variance(plan: Plan, x: str, correction: float) -> tuple[str, str]:
    """(x - mean, variance): a mean pass, then the sum of squared deviations (two passes, as
    accurate as PyTorch's Welford; one pass of sum and sum of squares cancels catastrophically)."""
    mean = plan.op("({0} / {1})", plan.reduce("sum", x, True), "R")
    d = plan.op("({0} - {1})", x, mean)
    ss = plan.reduce("sum", plan.op("({0} * {0})", d), True)
    denom = "R" if correction == 0 else f"(R - {literal(correction)})"
    return d, plan.op(f"({{0}} / {denom})", ss)


def _var(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
    correction, keep = _var_args(node)
    _, var = _centred_variance(low.plan, low.tensor(node, 0, "input"), correction)
    out = low.plan.op("tl.sqrt({0})", var) if op_name(node) == "std" else var
    return low.plan.row_view(out, keep)


def _softmax_args(node) -> None:  # type: ignore[no-untyped-def]
    import torch.nn.functional as F

    functional = node.op == "call_function" and node.target in (F.softmax, F.log_softmax)
    if arg(node, 3 if functional else 2, "dtype") is not None:  # F.softmax(x, dim, _stacklevel, dtype)
        raise Unsupported("softmax with dtype=")


def softmax_of(plan: Plan, x: str, log: bool) -> str:
    m = plan.reduce("max", x, True)
    e = plan.op("tl.exp({0} - {1})", x, m)
    s = plan.reduce("sum", e, True)
    if log:
        return plan.op("({0} - {1} - tl.log({2}))", x, m, s)
    return plan.op("({0} / {1})", e, s)


def _softmax(log: bool) -> Callable:
    def lower(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
        _softmax_args(node)
        return softmax_of(low.plan, low.tensor(node, 0, "input"), log)
    return lower


def layer_norm_of(plan: Plan, x: str, weight: str | None, bias: str | None, eps: str) -> str:
    centred, var = _centred_variance(plan, x, 0.0)
    y = plan.op(f"({{0}} * tl.rsqrt({{1}} + {eps}))", centred, var)
    if weight is not None:
        y = plan.op("({0} * {1})", y, weight)
    if bias is not None:
        y = plan.op("({0} + {1})", y, bias)
    return y


def rms_norm_of(plan: Plan, x: str, weight: str | None, eps: str) -> str:
    ms = plan.op("({0} / {1})", plan.reduce("sum", plan.op("({0} * {0})", x), True), "R")
    y = plan.op(f"({{0}} * tl.rsqrt({{1}} + {eps}))", x, ms)
    return plan.op("({0} * {1})", y, weight) if weight is not None else y


def eps_of(low: Lowerer, eps) -> str:  # type: ignore[no-untyped-def]
    if eps is None:  # F.rms_norm's default: the input dtype's machine epsilon, known at run time
        return low.plan.runtime("EPS", "torch.finfo({main}.dtype).eps")
    if not is_number(eps):
        raise Unsupported("a tensor eps")
    return literal(eps)


def _optional(low: Lowerer, x) -> str | None:  # type: ignore[no-untyped-def]
    return None if x is None else low.value_of(x)


def _layer_norm(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
    return layer_norm_of(low.plan, low.tensor(node, 0, "input"), _optional(low, arg(node, 2, "weight")),
                          _optional(low, arg(node, 3, "bias")), eps_of(low, arg(node, 4, "eps", 1e-5)))


def _rms_norm(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
    return rms_norm_of(low.plan, low.tensor(node, 0, "input"), _optional(low, arg(node, 2, "weight")),
                        eps_of(low, arg(node, 3, "eps", None)))


REDUCTIONS: dict[str, Callable] = {
    "sum": _sum, "mean": _mean, "amax": _extreme("max"), "amin": _extreme("min"),
    "max": _extreme("max"), "min": _extreme("min"),  # the (values, indices) forms: see reduction_dims
    "logsumexp": _logsumexp, "var": _var, "std": _var,
    "softmax": _softmax(False), "log_softmax": _softmax(True),
    "layer_norm": _layer_norm, "rms_norm": _rms_norm,
}

"""The torch ops a generated kernel supports, each lowered to Triton expressions in a ``Plan``.

One table, three spellings per op (``torch.relu``/``F.relu``, ``x.relu()``, ``nn.ReLU``), so a
problem is matched however it is written. Composite ops are lowered to what they compute: softmax
is a max, an exp, a sum and a division; layer norm is a mean, a centred variance (two passes, as
accurate as PyTorch's) and an affine epilogue; logsumexp guards an all ``-inf`` row like PyTorch
(the reduction family's lowerings: ``reductions.py``; the elementwise ones and modules: here).
Anything not in the table, or a supported op with an argument the lowering does not model
(``inplace=True``, a ``dtype=``, a tensor clamp bound), raises ``Unsupported``: the region is then
not offered as a kernel, never approximated.

The math is written with the documented ``triton.language`` functions only (``exp``, ``log``,
``sqrt``, ``rsqrt``, ``sigmoid``, ``erf``, ``maximum``, ``minimum``, ``where``, ``abs``, ``sin``,
``cos``), so the same source compiles for a GPU and runs under ``TRITON_INTERPRET=1``; ``tanh``
has no portable ``tl`` function and is written through ``sigmoid``.
"""

from __future__ import annotations

import operator
from typing import Callable

from ..graph.nodes import arg, dims_of, is_number, module_of, op_name
from .lowerer import Lowerer
from .plan import Unsupported, literal
from .reductions import REDUCTIONS, eps_of, layer_norm_of, rms_norm_of, softmax_of

TANH = "(2.0 * tl.sigmoid(2.0 * {0}) - 1.0)"
SQRT_1_2 = 0.7071067811865476
SQRT_2_PI = 0.7978845608028654


# ----------------------------------------------------------------------------- elementwise

def _fmt(template: str) -> Callable:
    def lower(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
        _no_inplace(node)
        return low.plan.op(template, low.tensor(node, 0, "input"))
    return lower


def _no_inplace(node) -> None:  # type: ignore[no-untyped-def]
    if node.kwargs.get("inplace") or (op_name(node) or "").endswith("_"):
        raise Unsupported("an in-place op")


def _binary(symbol: str) -> Callable:
    def lower(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
        if set(node.kwargs) - {"other", "alpha", "rounding_mode"} or node.kwargs.get("rounding_mode"):
            raise Unsupported(f"{op_name(node)} with {sorted(node.kwargs)}")
        a = low.scalar_or_tensor(arg(node, 0, "input"))
        b = low.scalar_or_tensor(arg(node, 1, "other"))
        alpha = node.kwargs.get("alpha", 1)
        if alpha != 1:
            if not is_number(alpha):
                raise Unsupported("a non-numeric alpha")
            b = low.plan.op("({0} * {1})", b, literal(alpha))
        return low.plan.op(f"({{0}} {symbol} {{1}})", a, b)
    return lower


def _pow(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
    base, exponent = arg(node, 0, "input"), arg(node, 1, "exponent")
    if not is_number(exponent):
        raise Unsupported("pow with a tensor exponent")
    x = low.scalar_or_tensor(base)
    templates = {1: "{0}", 2: "({0} * {0})", 3: "({0} * {0} * {0})", 4: "(({0} * {0}) * ({0} * {0}))",
                 0.5: "tl.sqrt({0})", -0.5: "tl.rsqrt({0})", -1: "(1.0 / {0})", -2: "(1.0 / ({0} * {0}))"}
    if float(exponent) not in templates:
        raise Unsupported(f"pow with exponent {exponent}")
    return low.plan.op(templates[float(exponent)], x)


def _maximum(fn: str) -> Callable:
    def lower(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
        return low.plan.op(f"tl.{fn}({{0}}, {{1}})", low.tensor(node, 0, "input"), low.tensor(node, 1, "other"))
    return lower


def _clamp_template(lo, hi) -> str:  # type: ignore[no-untyped-def]
    for bound in (lo, hi):
        if bound is not None and not is_number(bound):
            raise Unsupported("clamp with tensor bounds")
    out = "{0}"
    if lo is not None:
        out = f"tl.maximum({out}, {literal(lo)})"
    if hi is not None:
        out = f"tl.minimum({out}, {literal(hi)})"
    return out


def _clamp(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
    name = op_name(node)
    if name == "clamp_min":
        lo, hi = arg(node, 1, "min"), None
    elif name == "clamp_max":
        lo, hi = None, arg(node, 1, "max")
    else:
        lo, hi = arg(node, 1, "min"), arg(node, 2, "max")
    return low.plan.op(_clamp_template(lo, hi), low.tensor(node, 0, "input"))


def _hardtanh(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
    _no_inplace(node)
    lo, hi = arg(node, 1, "min_val", -1.0), arg(node, 2, "max_val", 1.0)
    return low.plan.op(_clamp_template(lo, hi), low.tensor(node, 0, "input"))


def _leaky_relu(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
    _no_inplace(node)
    slope = arg(node, 1, "negative_slope", 0.01)
    if not is_number(slope):
        raise Unsupported("leaky_relu with a tensor slope")
    return low.plan.op(f"tl.where({{0}} >= 0.0, {{0}}, {{0}} * {literal(slope)})", low.tensor(node, 0, "input"))


def _elu(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
    _no_inplace(node)
    alpha = arg(node, 1, "alpha", 1.0)
    return low.plan.op(f"tl.where({{0}} > 0.0, {{0}}, {literal(alpha)} * (tl.exp({{0}}) - 1.0))",
                       low.tensor(node, 0, "input"))


def _softplus_template(beta, threshold) -> str:  # type: ignore[no-untyped-def]
    if not (is_number(beta) and is_number(threshold)):
        raise Unsupported("softplus with tensor parameters")
    b, t = literal(beta), literal(threshold)
    return f"tl.where({{0}} * {b} > {t}, {{0}}, tl.log(1.0 + tl.exp({{0}} * {b})) / {b})"


def _softplus(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
    tmpl = _softplus_template(arg(node, 1, "beta", 1.0), arg(node, 2, "threshold", 20.0))
    return low.plan.op(tmpl, low.tensor(node, 0, "input"))


def _mish(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
    _no_inplace(node)
    sp = low.plan.op(_softplus_template(1.0, 20.0), low.tensor(node, 0, "input"))
    return low.plan.op("({0} * " + TANH.format("{1}") + ")", low.tensor(node, 0, "input"), sp)


def _gelu_template(approximate) -> str:  # type: ignore[no-untyped-def]
    if approximate == "tanh":
        inner = f"({SQRT_2_PI!r} * ({{0}} + 0.044715 * {{0}} * {{0}} * {{0}}))"
        return "(0.5 * {0} * (1.0 + " + TANH.replace("{0}", inner) + "))"
    if approximate in (None, "none"):
        return f"(0.5 * {{0}} * (1.0 + tl.erf({{0}} * {SQRT_1_2!r})))"
    raise Unsupported(f"gelu approximate={approximate!r}")


def _gelu(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
    return low.plan.op(_gelu_template(node.kwargs.get("approximate", arg(node, 1, "approximate", "none"))),
                       low.tensor(node, 0, "input"))


def _identity(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
    if op_name(node) == "contiguous" and (len(node.args) > 1 or node.kwargs):
        raise Unsupported("contiguous with a memory format")
    if op_name(node) == "clone" and node.kwargs.get("memory_format") not in (None,):
        raise Unsupported("clone with a memory format")
    return low.tensor(node, 0, "input")


def _rsub(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
    return low.plan.op("({1} - {0})", low.scalar_or_tensor(arg(node, 0, "input")),
                       low.scalar_or_tensor(arg(node, 1, "other")))


# one-input activations: the same template for the function, the method and the module
UNARY = {
    "neg": "(-{0})", "abs": "tl.abs({0})", "exp": "tl.exp({0})", "log": "tl.log({0})", "sqrt": "tl.sqrt({0})",
    "rsqrt": "tl.rsqrt({0})", "sigmoid": "tl.sigmoid({0})", "tanh": TANH, "sin": "tl.sin({0})",
    "cos": "tl.cos({0})", "erf": "tl.erf({0})", "relu": "tl.maximum({0}, 0.0)",
    "relu6": "tl.minimum(tl.maximum({0}, 0.0), 6.0)", "silu": "({0} * tl.sigmoid({0}))",
    "square": "({0} * {0})", "reciprocal": "(1.0 / {0})",
    "hardsigmoid": "(tl.minimum(tl.maximum({0} + 3.0, 0.0), 6.0) / 6.0)",
    "hardswish": "({0} * tl.minimum(tl.maximum({0} + 3.0, 0.0), 6.0) / 6.0)",
}
ELEMENTWISE: dict[str, Callable] = {
    **{name: _fmt(template) for name, template in UNARY.items()},
    "add": _binary("+"), "sub": _binary("-"), "mul": _binary("*"), "div": _binary("/"), "rsub": _rsub,
    "pow": _pow, "maximum": _maximum("maximum"), "minimum": _maximum("minimum"),
    "clamp": _clamp, "clip": _clamp, "clamp_min": _clamp, "clamp_max": _clamp,
    "hardtanh": _hardtanh, "leaky_relu": _leaky_relu, "elu": _elu, "softplus": _softplus, "mish": _mish,
    "gelu": _gelu, "clone": _identity, "detach": _identity, "contiguous": _identity,
}


# ----------------------------------------------------------------------------- reductions

def is_reduction(node) -> bool:  # type: ignore[no-untyped-def]
    return (module_kind(node) or op_name(node)) in REDUCTIONS and node.op != "get_attr"


def reduction_dims(node, ndim: int) -> tuple[int, ...] | None:  # type: ignore[no-untyped-def]
    """The dims a reduction-family node reduces (normalised), or None when it is not one.

    Raises Unsupported for a reduction the kernels do not model: over every dim implicitly
    (``x.sum()``), ``torch.max(x)`` without a dim, a non-literal dim."""
    name = module_kind(node) or op_name(node)
    if name not in REDUCTIONS:
        return None
    if name in ("layer_norm", "rms_norm"):
        count = _normalized_dims(node, ndim)
        if not 0 < count <= ndim:
            raise Unsupported("a norm over no dims")
        return tuple(range(ndim - count, ndim))
    if node.op == "call_module":
        dim = getattr(module_of(node.graph.owning_module, node), "dim", None)
    else:
        dim = arg(node, 1, "dim")
    if dim is None or dim == () or dim == []:
        raise Unsupported(f"{name} over every dim (one program would do all the work)")
    if name in ("max", "min") and not isinstance(dim, (int, list, tuple)):
        raise Unsupported(f"{name} of two tensors is elementwise (use maximum/minimum)")
    dims = dims_of(dim, ndim)
    if dims is None:
        raise Unsupported(f"{name} with a non-literal dim")
    return dims


def _normalized_dims(node, ndim: int) -> int:  # type: ignore[no-untyped-def]
    """How many trailing dims a layer/RMS norm normalises: a literal ``normalized_shape``, or
    ``x.shape[k:]`` of its own input (what the native-norms graph move writes)."""
    import torch.fx

    if node.op == "call_module":
        shape = getattr(module_of(node.graph.owning_module, node), "normalized_shape", None)
    else:
        shape = arg(node, 1, "normalized_shape")
    if isinstance(shape, int):
        shape = (shape,)
    if isinstance(shape, torch.fx.Node):
        return ndim - _shape_slice_start(shape, arg(node, 0, "input"))
    if not isinstance(shape, (list, tuple)) or not shape or not all(isinstance(d, int) for d in shape):
        raise Unsupported("a normalized_shape that is not literal")
    return len(shape)


def _shape_slice_start(node, x) -> int:  # type: ignore[no-untyped-def]
    """``k`` of a traced ``x.shape[k:]``; Unsupported for any other expression."""
    ok = node.op == "call_function" and node.target is operator.getitem and len(node.args) == 2
    src, index = (node.args if ok else (None, None))
    ok = ok and isinstance(index, slice) and index.stop is None and index.step is None
    ok = ok and getattr(src, "op", None) == "call_function" and src.target is getattr and src.args == (x, "shape")
    if not ok or not isinstance(index.start, int) or index.start < 0:
        raise Unsupported("a normalized_shape that is neither literal nor x.shape[k:]")
    return index.start


# ----------------------------------------------------------------------------- modules

_MODULE_KINDS = {
    "ReLU": "relu", "ReLU6": "relu6", "GELU": "gelu", "SiLU": "silu", "Sigmoid": "sigmoid", "Tanh": "tanh",
    "Hardtanh": "hardtanh", "LeakyReLU": "leaky_relu", "Hardswish": "hardswish", "Hardsigmoid": "hardsigmoid",
    "Mish": "mish", "Softplus": "softplus", "ELU": "elu", "Identity": "identity", "Dropout": "dropout",
    "Softmax": "softmax", "LogSoftmax": "log_softmax", "LayerNorm": "layer_norm", "RMSNorm": "rms_norm",
}


def module_kind(node) -> str | None:  # type: ignore[no-untyped-def]
    if node.op != "call_module":
        return None
    mod = module_of(node.graph.owning_module, node)
    return _MODULE_KINDS.get(type(mod).__name__) if mod is not None and type(mod).__module__.startswith(
        "torch.nn") else None


def _lower_module(low: Lowerer, node, kind: str) -> str:  # type: ignore[no-untyped-def]
    mod = module_of(low.gm, node)
    x = low.tensor(node, 0, "input")
    plan = low.plan
    if getattr(mod, "inplace", False):
        raise Unsupported("an in-place module")
    if kind == "identity":
        return x
    if kind == "dropout":
        if mod.p != 0:
            raise Unsupported("dropout with p > 0 (random in training mode)")
        return x
    if kind == "gelu":
        return plan.op(_gelu_template(mod.approximate), x)
    if kind == "hardtanh":
        return plan.op(_clamp_template(mod.min_val, mod.max_val), x)
    if kind == "leaky_relu":
        return plan.op(f"tl.where({{0}} >= 0.0, {{0}}, {{0}} * {literal(mod.negative_slope)})", x)
    if kind == "elu":
        return plan.op(f"tl.where({{0}} > 0.0, {{0}}, {literal(mod.alpha)} * (tl.exp({{0}}) - 1.0))", x)
    if kind == "softplus":
        return plan.op(_softplus_template(mod.beta, mod.threshold), x)
    if kind == "mish":
        sp = plan.op(_softplus_template(1.0, 20.0), x)
        return plan.op("({0} * " + TANH.format("{1}") + ")", x, sp)
    if kind in ("softmax", "log_softmax"):
        return softmax_of(plan, x, kind == "log_softmax")
    prefix = str(node.target)
    weight = low.value_of(f"{prefix}.weight") if getattr(mod, "weight", None) is not None else None
    if kind == "layer_norm":
        bias = low.value_of(f"{prefix}.bias") if getattr(mod, "bias", None) is not None else None
        return layer_norm_of(plan, x, weight, bias, literal(mod.eps))
    if kind == "rms_norm":
        return rms_norm_of(plan, x, weight, eps_of(low, mod.eps))
    return plan.op(UNARY[kind], x)


def supported(node) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``node`` is an op a kernel can compute (its arguments are checked when lowered)."""
    if node.op == "call_module":
        return module_kind(node) is not None
    if node.op not in ("call_function", "call_method"):
        return False
    name = op_name(node)
    if node.op == "call_function" and node.target in (operator.getitem, getattr):
        src = node.args[0] if node.args else None  # the values of max/min(x, dim), nothing else
        return (len(node.args) == 2 and node.args[1] in (0, "values") and hasattr(src, "op")
                and op_name(src) in ("max", "min"))
    return name in ELEMENTWISE or name in REDUCTIONS


def lower(low: Lowerer, node) -> str:  # type: ignore[no-untyped-def]
    """The plan value computing ``node``; Unsupported when the lowering does not model it."""
    kind = module_kind(node)
    if kind is not None:
        return _lower_module(low, node, kind)
    name = op_name(node)
    if name in ELEMENTWISE:
        return ELEMENTWISE[name](low, node)
    if name in REDUCTIONS:
        return REDUCTIONS[name](low, node)
    raise Unsupported(f"op {name}")

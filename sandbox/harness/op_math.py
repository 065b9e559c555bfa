"""The arithmetic one operator does: simple FLOPs and transcendental evaluations per element.

The profiler estimates FLOPs for GEMMs, convolutions, ``add`` and ``mul`` only, so an exact-erf
GELU on 4.2M elements read as zero work and its speed of light as bytes alone: "5.28x left" when
the bound was ``erf``'s throughput on one core (issue 41). This table gives every elementwise,
reduction and normalization op its per-element cost, with the transcendentals (``TRANSCENDENTALS``)
counted apart: they run at the machine's measured vector rate of that function (``cost.py``
measures it once per host and thread count), not at the FMA rate, so "left" is the lower of the
memory and the compute bound (docs/architecture.md#speed-of-light).

The counts are a lower bound of the work, as a speed of light must be: a row reduction's per-row
work (one ``rsqrt`` a LayerNorm row) is left out, a division by a scalar is a multiply by its
reciprocal, ``pow(x, 3)`` is two multiplies and ``gelu``'s ``approximate`` (not recorded by the
profiler) is read as its default, the exact ``erf``.

Standalone (stdlib only): shipped beside the harnesses and loaded by path there, imported as
``arbor.sandbox.harness.op_math`` in Arbor.
"""

from __future__ import annotations

import math

TRANSCENDENTALS = ("exp", "log", "erf", "tanh", "sigmoid", "pow", "sqrt", "div")

# FP32 FLOPs one evaluation is worth where no vector rate was measured (a GPU, whose elementwise
# probes would only measure its memory; a CPU measurement older than the probe): an SFU op issues at
# a quarter of the FP32 FMA rate (8 FLOPs' slot), plus the range reduction and polynomial around it.
FLOP_EQUIVALENT = {"exp": 10.0, "log": 10.0, "erf": 24.0, "tanh": 20.0, "sigmoid": 20.0, "pow": 20.0,
                   "sqrt": 10.0, "div": 12.0}

# base op name -> (simple FLOPs per element, {transcendental: evaluations per element}); elements
# are those of the op's largest tensor input (the output of a broadcasting elementwise op, the
# input of a reduction or normalization).
PER_ELEMENT: dict[str, tuple[float, dict[str, float]]] = {
    # piecewise-linear activations and comparisons
    "relu": (1, {}), "threshold": (1, {}), "clamp": (2, {}), "clip": (2, {}), "clamp_min": (1, {}),
    "clamp_max": (1, {}), "hardtanh": (2, {}), "relu6": (2, {}), "leaky_relu": (2, {}), "hardsigmoid": (3, {}),
    "hardswish": (4, {}), "abs": (1, {}), "neg": (1, {}), "sign": (1, {}), "where": (1, {}), "masked_fill": (1, {}),
    "maximum": (1, {}), "minimum": (1, {}), "eq": (1, {}), "ne": (1, {}), "lt": (1, {}), "le": (1, {}),
    "gt": (1, {}), "ge": (1, {}), "square": (1, {}),
    # arithmetic the profiler may not estimate (its estimate wins where it has one)
    "add": (1, {}), "sub": (1, {}), "rsub": (1, {}), "mul": (1, {}), "addcmul": (2, {}),
    "addcdiv": (1, {"div": 1}), "div": (0, {"div": 1}), "true_divide": (0, {"div": 1}),
    "reciprocal": (0, {"div": 1}), "lerp": (2, {}),
    # transcendentals and the activations built on them
    "exp": (0, {"exp": 1}), "exp2": (0, {"exp": 1}), "expm1": (0, {"exp": 1}), "log": (0, {"log": 1}),
    "log1p": (0, {"log": 1}), "log2": (0, {"log": 1}), "log10": (0, {"log": 1}), "erf": (0, {"erf": 1}),
    "erfc": (0, {"erf": 1}), "tanh": (0, {"tanh": 1}), "sigmoid": (0, {"sigmoid": 1}), "sqrt": (0, {"sqrt": 1}),
    "rsqrt": (0, {"sqrt": 1}), "pow": (0, {"pow": 1}), "gelu": (4, {"erf": 1}), "silu": (1, {"sigmoid": 1}),
    "elu": (3, {"exp": 1}), "selu": (3, {"exp": 1}), "celu": (3, {"exp": 1}), "softplus": (2, {"exp": 1, "log": 1}),
    "mish": (3, {"exp": 1, "log": 1, "tanh": 1}), "softsign": (2, {"div": 1}),
    "log_sigmoid_forward": (2, {"exp": 1, "log": 1}), "glu": (1, {"sigmoid": 0.5}),
    # reductions (per input element)
    "sum": (1, {}), "mean": (1, {}), "amax": (1, {}), "amin": (1, {}), "max": (1, {}), "min": (1, {}),
    "argmax": (1, {}), "argmin": (1, {}), "cumsum": (1, {}), "cumprod": (1, {}), "prod": (1, {}),
    "norm": (2, {}), "linalg_vector_norm": (2, {}), "var": (3, {}), "std": (3, {}), "var_mean": (3, {}),
    "std_mean": (3, {}), "logsumexp": (2, {"exp": 1}),
    # softmax and normalizations: max, subtract, exp, sum, scale; mean, variance, normalize, affine
    "softmax": (4, {"exp": 1}), "_softmax": (4, {"exp": 1}), "log_softmax": (4, {"exp": 1}),
    "_log_softmax": (4, {"exp": 1}), "layer_norm": (8, {}), "native_layer_norm": (8, {}),
    "group_norm": (8, {}), "native_group_norm": (8, {}), "instance_norm": (8, {}), "batch_norm": (4, {}),
    "native_batch_norm": (4, {}), "_native_batch_norm_legit_no_training": (4, {}), "rms_norm": (4, {}),
    "_fused_rms_norm": (4, {}),
}


def base_name(name: str) -> str:
    """'aten::relu_' -> 'relu': in-place and out variants do the same work."""
    base = name.split("::")[-1].split(".")[0]
    return base[:-1] if base.endswith("_") and not base.startswith("_") else base


def known(name: str) -> bool:
    return base_name(name) in PER_ELEMENT


def _numel(shapes: list | None) -> int:
    best = 0
    for shape in shapes or []:
        if isinstance(shape, (list, tuple)) and shape and all(isinstance(d, int) for d in shape):
            best = max(best, math.prod(shape))
    return best


def _scalar_second(shapes: list | None, concrete: list | None) -> tuple[bool, object]:
    """Whether the op's second argument is a scalar, and its value where the profiler recorded it."""
    second = shapes[1] if shapes and len(shapes) > 1 else None
    value = concrete[1] if concrete and len(concrete) > 1 else None
    return (not second), value


def op_math(name: str, shapes: list | None, concrete: list | None = None) -> tuple[float, dict[str, float]]:
    """(simple FLOPs, {transcendental: evaluations}) one call of ``name`` does at least; (0, {}) for
    an op the table does not know (a GEMM or convolution: the profiler's estimate counts those)."""
    base = base_name(name)
    row = PER_ELEMENT.get(base)
    n = _numel(shapes)
    if row is None or not n:
        return 0.0, {}
    flops, fns = row
    scalar, value = _scalar_second(shapes, concrete)
    if base in ("div", "true_divide") and scalar:
        return float(n), {}  # times the reciprocal
    if base == "pow" and scalar and isinstance(value, (int, float)):
        # ATen's own fast paths (pow_tensor_scalar_optimized): small integer powers multiply,
        # halves take a square root, negative powers one division more
        if value in (1, 2, 3, -1, -2, -3):
            return float(n) * (abs(int(value)) - 1), ({"div": float(n)} if value < 0 else {})
        if value in (0.5, -0.5):
            return 0.0, {"sqrt": float(n), **({"div": float(n)} if value < 0 else {})}
    return float(flops) * n, {k: v * n for k, v in fns.items() if v}


def add_counts(into: dict[str, float], more: dict[str, float]) -> dict[str, float]:
    for k, v in more.items():
        into[k] = into.get(k, 0.0) + float(v)
    return into


# A function is no slower than its cheapest identity within a float32 tolerance: tanh(x) =
# 1 - 2 / (exp(2x) + 1), sigmoid(x) = 1 / (1 + exp(-x)), x ** y = exp(y * log(x)), and erf by
# Abramowitz-Stegun 7.1.26 (one exp, one division and a polynomial, |error| <= 1.5e-7). ATen's own
# kernels are slower than that on some machines (a held-out tanh ran 3.4x faster than torch.tanh
# when compiled), and a speed of light must not be stricter than what a candidate can reach.
IDENTITIES = {"tanh": ("exp", "div"), "sigmoid": ("exp", "div"), "erf": ("exp", "div"), "pow": ("exp", "log")}


def vector_rate(fn: str, vector: dict | None) -> float:
    """Evaluations per second of ``fn``: the faster of its measured rate and its identity's
    (the parts' times added, the identity's few FLOPs left out); 0 when unmeasured."""
    vector = vector or {}
    rate = float(vector.get(fn) or 0.0)
    parts = [float(vector.get(p) or 0.0) for p in IDENTITIES.get(fn, ())]
    if parts and all(parts):
        rate = max(rate, 1.0 / sum(1.0 / r for r in parts))
    return rate


# The arithmetic of Arbor's own generated math (``agents/transforms/cpp/math.py``), in FLOPs at the
# FMA rate: each floating-point vector operation (FMA, multiply, add, rounding) counted as the 2 FLOPs
# an FMA slot is worth, the comparisons, blends and integer exponent operations left out (they issue
# on other ports), so it is a lower bound of that code's time. Needed because the measured rate is
# ATen's: on the development VM (AMD EPYC, AVX2, one thread) the generated exp ran 2.5x torch.exp
# on cache-resident data, and a speed of light slower than a kernel Arbor writes is no bound.
# exp: n = round(x log2e) (2), r (2 FMAs), the degree-6 polynomial (8); division and square root as
# a reciprocal estimate and its Newton step (3); erf (A-S 7.1.26): exp, one division, the
# degree-5 polynomial in t, -a*a, 1 - p*e (8); tanh and sigmoid: exp, one division, 1-2 more; log:
# the mantissa's degree-8 polynomial and its assembly (15).
GENERATED_FLOPS = {"exp": 24.0, "div": 6.0, "sqrt": 6.0, "erf": 46.0, "tanh": 34.0, "sigmoid": 32.0,
                   "log": 30.0, "pow": 56.0}


def transcendental_seconds(counts: dict | None, vector: dict | None, flops_per_s: float | None) -> float:
    """The least time ``counts`` evaluations take: each function at the faster of its vector rate
    (``vector_rate``: measured, or its identity's) and Arbor's generated math at the FP32 rate
    (``GENERATED_FLOPS``); with neither a rate nor a measured vector rate, at ``FLOP_EQUIVALENT``
    FLOPs each; 0 where nothing is known."""
    total = 0.0
    for fn, n in (counts or {}).items():
        rate = vector_rate(fn, vector)
        options = [float(n) / rate] if rate > 0 else []
        if flops_per_s:
            flops = GENERATED_FLOPS.get(fn) if rate > 0 else FLOP_EQUIVALENT.get(fn, 10.0)
            if flops:
                options.append(float(n) * flops / float(flops_per_s))
        total += min(options) if options else 0.0
    return total

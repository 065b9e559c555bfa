"""Recognising hand-written activations by what they compute, not by how they are spelled.

A chain of pointwise ops whose only tensor input is one value ``x`` (``0.5*x*(1+tanh(c*(x+k*x**3)))``
in any spelling, split over several statements or not) is evaluated in float64 on probe points and
compared with PyTorch's fused activations; a match replaces the chain by the single fused call.
The probe covers [-8, 8] densely; the match must hold to 1e-6 relative, which separates, e.g., the
tanh and erf GELUs (they differ by ~1e-3).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .nodes import Rewrite, is_number, op_name

_POINTWISE = {"add", "sub", "mul", "div", "pow", "neg", "tanh", "sigmoid", "exp", "log", "erf", "sqrt",
              "rsqrt", "abs", "relu", "softplus", "clamp", "clip", "square", "reciprocal", "log1p", "expm1",
              "maximum", "minimum", "relu6", "hardtanh", "elu", "leaky_relu", "gelu", "silu", "mish",
              "clamp_min", "clamp_max", "truediv", "floordiv"}
_IDENT = {"clone", "contiguous", "detach"}

LIBRARY = [
    ("gelu (tanh)", lambda x: F.gelu(x, approximate="tanh"), F.gelu, {"approximate": "tanh"}),
    ("gelu (erf)", lambda x: F.gelu(x), F.gelu, {}),
    ("silu", F.silu, F.silu, {}),
    ("mish", F.mish, F.mish, {}),
    ("sigmoid", torch.sigmoid, torch.sigmoid, {}),
    ("tanh", torch.tanh, torch.tanh, {}),
    ("softplus", F.softplus, F.softplus, {}),
    ("relu", torch.relu, torch.relu, {}),
    ("hardswish", F.hardswish, F.hardswish, {}),
    ("hardsigmoid", F.hardsigmoid, F.hardsigmoid, {}),
    ("relu6", F.relu6, F.relu6, {}),
    ("elu", F.elu, F.elu, {}),
    ("selu", F.selu, F.selu, {}),
]
_PROBE = torch.cat([torch.linspace(-8, 8, 4001, dtype=torch.float64), torch.tensor([0.0, 1e-3, -1e-3],
                                                                                    dtype=torch.float64)])


def _pointwise(node) -> bool:  # type: ignore[no-untyped-def]
    name = op_name(node)
    if name in _IDENT:
        return len(node.args) == 1 and not node.kwargs
    return name in _POINTWISE and node.op in ("call_function", "call_method")


def _chain(root):  # type: ignore[no-untyped-def]
    """(source, nodes in graph order) when ``root`` is a pointwise chain of exactly one tensor input."""
    nodes, sources, stack = set(), set(), [root]
    while stack:
        n = stack.pop()
        if n in nodes:
            continue
        if not _pointwise(n):
            sources.add(n)
            continue
        nodes.add(n)
        for a in list(n.args) + list(n.kwargs.values()):
            if isinstance(a, torch.fx.Node):
                stack.append(a)
            elif not (is_number(a) or a is None or isinstance(a, (str, bool))):
                return None
        if len(sources) > 1:
            return None
    if len(sources) != 1 or len(nodes) < 2:
        return None
    for n in nodes:  # every intermediate is consumed inside the chain only
        if n is not root and any(u not in nodes for u in n.users):
            return None
    order = [n for n in root.graph.nodes if n in nodes]
    return next(iter(sources)), order


def _evaluate(source, order, x: torch.Tensor):  # type: ignore[no-untyped-def]
    env = {source: x}

    def val(a):  # type: ignore[no-untyped-def]
        return env[a] if isinstance(a, torch.fx.Node) else a

    for n in order:
        args = [val(a) for a in n.args]
        kwargs = {k: val(v) for k, v in n.kwargs.items()}
        if n.op == "call_method":
            env[n] = getattr(args[0], str(n.target))(*args[1:], **kwargs)
        else:
            env[n] = n.target(*args, **kwargs)
    return env[order[-1]]


def fuse_activations(rw: Rewrite) -> int:
    count = 0
    done: set = set()
    for root in reversed(list(rw.graph.nodes)):
        if root in done or not _pointwise(root):
            continue
        found = _chain(root)
        if found is None:
            continue
        source, order = found
        try:
            with torch.no_grad():
                y = _evaluate(source, order, _PROBE.clone())
        except Exception:  # noqa: BLE001 - an op that does not take a float64 vector: no match
            continue
        if not isinstance(y, torch.Tensor) or y.shape != _PROBE.shape:
            continue
        for label, ref, fn, kwargs in LIBRARY:
            want = ref(_PROBE)
            if torch.allclose(y, want, rtol=1e-6, atol=1e-7):
                if len(order) == 1 and order[0].target in (fn, getattr(torch, label, None)):
                    break
                with rw.graph.inserting_after(root):
                    new = rw.graph.call_function(fn, (source,), dict(kwargs))
                root.replace_all_uses_with(new)
                done.update(order)
                rw.notes.append(f"hand-written {label} ({len(order)} ops) as one fused call")
                count += 1
                break
    return count



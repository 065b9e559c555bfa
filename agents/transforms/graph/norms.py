"""Hand-written normalisations recognised by value and replaced by the native op.

A layer norm or RMS norm written op by op (mean, centring, variance, ``+ eps``, sqrt, division,
optional weight and bias) costs one pass over the tensor per op; ``F.layer_norm`` / ``F.rms_norm``
do it in one or two. The region ending at a node is accepted when its only tensor input is one
value ``x``, it holds only pointwise ops and keepdim reductions over the same dims, and it reads
at most two parameters. It is then evaluated in float64 on a probe (one slice scaled by 1e-3, so
``eps`` matters) and compared with the native op for each ``eps`` literal found in the region and
each assignment of the parameters to weight/bias; the match must hold to 1e-6 relative, so an
unbiased variance, another ``eps`` or a missing centring is never taken for a norm. Normalised
dims at the end use the native op with ``x.shape[k:]`` (no size baked into the code); an RMS norm
over other dims (e.g. channels of NCHW) becomes ``x * rsqrt(mean(x*x) + eps)``: one division and
one square root fewer per element.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.nn.functional as F

from .activations import _pointwise
from .nodes import Rewrite, arg, dims_of, is_number, op_name, shape

_REDUCE = {"mean", "sum", "var", "std"}
MAX_PROBE = 1 << 21


def _region(root):  # type: ignore[no-untyped-def]
    """(x, nodes in graph order, parameter nodes, reductions) of the pointwise/reduction region."""
    nodes, sources, params, stack = set(), set(), set(), [root]
    while stack:
        n = stack.pop()
        if n in nodes or n in params or n in sources:
            continue
        if n.op == "get_attr":
            params.add(n)
            continue
        if not (_pointwise(n) or (op_name(n) in _REDUCE and n.op in ("call_function", "call_method"))):
            sources.add(n)
            if len(sources) > 1:
                return None
            continue
        nodes.add(n)
        for a in list(n.args) + list(n.kwargs.values()):
            if isinstance(a, torch.fx.Node):
                stack.append(a)
            elif isinstance(a, (list, tuple)) and all(isinstance(d, int) for d in a):
                continue
            elif not (is_number(a) or a is None or isinstance(a, (str, bool))):
                return None
    reductions = [n for n in nodes if op_name(n) in _REDUCE]
    if len(sources) != 1 or not reductions or len(params) > 2:
        return None
    for n in nodes:
        if n is not root and any(u not in nodes for u in n.users):
            return None
    order = [n for n in root.graph.nodes if n in nodes]
    return next(iter(sources)), order, sorted(params, key=lambda p: str(p.target)), reductions


def _dims(reductions, ndim: int) -> tuple[int, ...] | None:  # type: ignore[no-untyped-def]
    found = set()
    for r in reductions:
        src = r.args[0] if r.args else None
        if not isinstance(src, torch.fx.Node) or shape(src) is None or len(shape(src)) != ndim:
            return None
        if shape(r) is None or len(shape(r)) != ndim:
            return None  # keepdim=False: the result no longer lines up with x
        d = dims_of(arg(r, 1, "dim"), ndim)
        found.add(tuple(range(ndim)) if d is None else d)
    return found.pop() if len(found) == 1 else None


def _evaluate(order, env: dict):  # type: ignore[no-untyped-def]
    def val(a):  # type: ignore[no-untyped-def]
        return env[a] if isinstance(a, torch.fx.Node) else a

    for n in order:
        args = [val(a) for a in n.args]
        kwargs = {k: val(v) for k, v in n.kwargs.items()}
        env[n] = getattr(args[0], str(n.target))(*args[1:], **kwargs) if n.op == "call_method" else \
            n.target(*args, **kwargs)
    return env[order[-1]]


def _eps_candidates(order) -> list[float]:  # type: ignore[no-untyped-def]
    found = {float(a) for n in order for a in list(n.args) + list(n.kwargs.values())
             if is_number(a) and 0 < float(a) <= 0.1}
    return sorted(found) + [0.0]


def _match(x, order, params, dims, xs):  # type: ignore[no-untyped-def]
    """("layer"|"rms", eps, weight node, bias node) of the first native norm equal to the region."""
    ndim = len(xs)
    trailing = dims == tuple(range(dims[0], ndim))
    probe_shape = tuple(xs[i] if i in dims else 2 for i in range(ndim))
    if math.prod(probe_shape) > MAX_PROBE:
        return None
    g = torch.Generator().manual_seed(0)
    probe = torch.randn(probe_shape, generator=g, dtype=torch.float64) * 1.5 + 0.7
    lead = [i for i in range(ndim) if i not in dims]
    if lead:
        probe.select(lead[0], 0).mul_(1e-3)  # a slice with a tiny variance: eps decides its output
    values = {p: torch.randn(shape(p), generator=g, dtype=torch.float64) for p in params}
    if any(shape(p) is None for p in params):
        return None
    try:
        with torch.no_grad():
            y = _evaluate(order, {x: probe, **values})
    except Exception:  # noqa: BLE001 - ops that do not take this probe: not a norm
        return None
    if not isinstance(y, torch.Tensor) or y.shape != probe.shape:
        return None
    ns = probe_shape[dims[0]:] if trailing else None
    assign = [(None, None)] + [(p, None) for p in params] + [(None, p) for p in params]
    if len(params) == 2:
        assign += [(params[0], params[1]), (params[1], params[0])]
    for eps in _eps_candidates(order):
        for w, b in assign:
            if any(p is not None and tuple(shape(p)) != tuple(ns or ()) for p in (w, b)):
                continue
            if {p for p in (w, b) if p is not None} != set(params):
                continue  # every parameter read by the region must have a role
            wv, bv = values.get(w), values.get(b)
            if trailing:
                wants = [("layer", F.layer_norm(probe, ns, wv, bv, eps))]
                if b is None:
                    wants.append(("rms", F.rms_norm(probe, ns, wv, eps)))
            elif w is None and b is None:
                wants = [("rms", probe * torch.rsqrt((probe * probe).mean(dims, keepdim=True) + eps))]
            else:
                wants = []
            for kind, want in wants:
                if torch.allclose(y, want, rtol=1e-6, atol=1e-9):
                    return kind, eps, w, b
    return None


def _emit(rw: Rewrite, root, x, kind: str, eps: float, w, b, dims, trailing: bool):  # type: ignore[no-untyped-def]
    g = rw.graph
    with g.inserting_after(root):
        if trailing:
            size = g.call_function(getattr, (x, "shape"))
            with g.inserting_after(size):
                ns = g.call_function(operator.getitem, (size, slice(dims[0], None)))
            with g.inserting_after(ns):
                if kind == "layer":
                    return g.call_function(F.layer_norm, (x, ns, w, b, eps))
                return g.call_function(F.rms_norm, (x, ns, w, eps))
        sq = g.call_function(operator.mul, (x, x))
    with g.inserting_after(sq):
        mean = g.call_method("mean", (sq, list(dims)), {"keepdim": True})
    with g.inserting_after(mean):
        shifted = g.call_function(operator.add, (mean, eps))
    with g.inserting_after(shifted):
        inv = g.call_function(torch.rsqrt, (shifted,))
    with g.inserting_after(inv):
        return g.call_function(operator.mul, (x, inv))


def native_norms(rw: Rewrite) -> int:
    """Hand-written layer / RMS norms replaced by F.layer_norm / F.rms_norm (or an rsqrt form)."""
    count = 0
    done: set = set()
    for root in reversed(list(rw.graph.nodes)):
        if root in done or not _pointwise(root) or root.meta.get("arbor_native_norm"):
            continue  # (an rsqrt form emitted in an earlier round is not re-matched)
        found = _region(root)
        if found is None:
            continue
        x, order, params, reductions = found
        xs = shape(x)
        if xs is None or shape(root) != xs:
            continue
        dims = _dims(reductions, len(xs))
        if dims is None:
            continue
        m = _match(x, order, params, dims, xs)
        if m is None:
            continue
        kind, eps, w, b = m
        trailing = dims == tuple(range(dims[0], len(xs)))
        new = _emit(rw, root, x, kind, eps, w, b, dims, trailing)
        root.replace_all_uses_with(new)
        new.meta["arbor_native_norm"] = True
        done.update(order)
        how = f"F.{kind}_norm" if trailing else "x * rsqrt(mean(x*x) + eps)"
        rw.notes.append(f"hand-written {kind} norm over dims {list(dims)} ({len(order)} ops) as {how}, eps={eps:g}")
        count += 1
    return count

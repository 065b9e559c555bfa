"""Folding work into the weights of a Linear/Conv once, at ``__init__``, instead of every call.

Two identities, exact up to rounding:
- affine epilogues: ``a * (x W^T + b) + c`` (scalar multiplies and divisions, scalar or
  per-channel bias adds, ``y + s * y`` residual scalings, clones and detaches in between) is a
  Linear/Conv with weight ``a W`` and bias ``a b + c``;
- reductions over the output features: ``sum_j (x W^T + b)_j = x . (sum_j W_j) + sum_j b_j``,
  so a GEMM followed by a sum (or mean) over its outputs is a matrix-vector product.
The new weights are buffers computed from the original parameters in ``__init__``, so the model is
built from the same random draws as the reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .nodes import Rewrite, arg, dims_of, is_number, module_of, op_name, shape

_CONV_FN = {torch.nn.Conv1d: F.conv1d, torch.nn.Conv2d: F.conv2d, torch.nn.Conv3d: F.conv3d}


@dataclass
class Site:
    """A Linear/Conv call: its input, weight and bias expressions, and how to call it again."""

    node: object
    x: object
    weight: str
    bias: str | None
    kind: str  # "linear" or "conv"
    conv_args: tuple = ()
    conv_fn: object = None
    channel_dim: int = -1


def site_of(rw: Rewrite, node) -> Site | None:  # type: ignore[no-untyped-def]
    mod = module_of(rw.gm, node)
    if isinstance(mod, torch.nn.Linear) and len(node.args) == 1:
        bias = f"self.{node.target}.bias" if mod.bias is not None else None
        return Site(node, node.args[0], f"self.{node.target}.weight", bias, "linear")
    if type(mod) in _CONV_FN and len(node.args) == 1 and mod.padding_mode == "zeros":
        bias = f"self.{node.target}.bias" if mod.bias is not None else None
        args = (mod.stride, mod.padding, mod.dilation, mod.groups)
        return Site(node, node.args[0], f"self.{node.target}.weight", bias, "conv", args, _CONV_FN[type(mod)], 1)
    name = op_name(node)
    if name == "linear" and node.op == "call_function" and len(node.args) >= 2:
        w = rw.expr_of(node.args[1])
        b_node = arg(node, 2, "bias")
        b = rw.expr_of(b_node) if isinstance(b_node, torch.fx.Node) else None
        if w is None or (b_node is not None and b is None):
            return None
        return Site(node, node.args[0], w, b, "linear")
    if name in ("matmul", "mm") and len(node.args) == 2 and isinstance(node.args[1], torch.fx.Node):
        t = node.args[1]  # x @ W.T with W a (out, in) parameter
        transposed = op_name(t) == "t" or (op_name(t) == "getattr" and t.args[1] == "T") or (
            op_name(t) == "transpose" and {a % 2 for a in t.args[1:3] if isinstance(a, int)} == {0, 1})
        if transposed and isinstance(t.args[0], torch.fx.Node):
            w = rw.expr_of(t.args[0])
            if w is not None and shape(t.args[0]) is not None and len(shape(t.args[0])) == 2:
                return Site(node, node.args[0], w, None, "linear")
    return None


def _call(rw: Rewrite, site: Site, weight, bias, after):  # type: ignore[no-untyped-def]
    with rw.graph.inserting_after(after):
        if site.kind == "linear":
            return rw.graph.call_function(F.linear, (site.x, weight, bias))
        return rw.graph.call_function(site.conv_fn, (site.x, weight, bias, *site.conv_args))


def _channel_param(rw: Rewrite, node, out_shape: tuple, channel_dim: int) -> str | None:  # type: ignore[no-untyped-def]
    """``self.p.reshape(-1)`` when ``node`` is a parameter that varies only along the channel dim."""
    path = rw.expr_of(node)
    s = shape(node)
    if path is None or s is None or len(s) > len(out_shape):
        return None
    padded = (1,) * (len(out_shape) - len(s)) + s
    c = channel_dim % len(out_shape)
    if any(padded[i] != 1 for i in range(len(out_shape)) if i != c) or padded[c] != out_shape[c]:
        return None
    return f"{path}.reshape(-1)"


_IDENT = {"clone", "detach", "contiguous"}


def _affine_step(rw: Rewrite, node, aff: dict, out_shape: tuple, channel_dim: int):  # type: ignore[no-untyped-def]
    """(a, terms) of ``node`` when it is affine in the region's values, else None."""
    name = op_name(node)
    args = list(node.args)
    if name in _IDENT and args and args[0] in aff and len(args) == 1 and not node.kwargs:
        return aff[args[0]]
    if name == "neg" and len(args) == 1 and args[0] in aff:
        a, terms = aff[args[0]]
        return -a, [(-k, s) for k, s in terms]
    if name not in ("mul", "div", "add", "sub") or len(args) != 2 or node.kwargs:
        return None
    x, y = args
    if name in ("mul", "div"):
        if x in aff and is_number(y) and not (name == "div" and y == 0):
            k = y if name == "mul" else 1.0 / y
        elif name == "mul" and y in aff and is_number(x):
            x, k = y, x
        else:
            return None
        a, terms = aff[x]
        return a * k, [(c * k, s) for c, s in terms]
    sign = 1.0 if name == "add" else -1.0
    if x in aff and y in aff:
        (a1, t1), (a2, t2) = aff[x], aff[y]
        return a1 + sign * a2, t1 + [(sign * c, s) for c, s in t2]
    if x in aff:
        (a, terms), other = aff[x], y
    elif y in aff and name == "add":
        (a, terms), other = aff[y], x
    elif y in aff:  # k - f(x) = (-f(x)) + k
        a, terms = aff[y]
        a, terms, other, sign = -a, [(-c, s) for c, s in terms], x, 1.0
    else:
        return None
    if is_number(other):
        return a, terms + [(sign * float(other), None)]
    if isinstance(other, torch.fx.Node):
        param = _channel_param(rw, other, out_shape, channel_dim)
        if param is not None:
            return a, terms + [(sign, param)]
    return None


def _fold_expr(site: Site, a: float, terms: list) -> tuple[str, str | None]:
    weight = site.weight if a == 1.0 else f"{site.weight} * {a!r}"
    parts = [f"{site.bias} * {a!r}" if site.bias and a != 1.0 else site.bias or ""]
    for c, src in terms:
        piece = f"{c!r}" if src is None else (src if c == 1.0 else f"{src} * {c!r}")
        parts.append(piece)
    parts = [p for p in parts if p]
    if not parts:
        return weight, None
    zero = f"{site.weight}.new_zeros({site.weight}.shape[0])"
    if site.bias is None:
        parts.insert(0, zero)
    return weight, " + ".join(parts)


def fold_affine(rw: Rewrite) -> int:
    """Scalar and per-channel affine epilogues of a Linear/Conv folded into its weights."""
    count = 0
    for node in list(rw.graph.nodes):
        site = site_of(rw, node)
        out_shape = shape(node)
        if site is None or out_shape is None:
            continue
        channel_dim = site.channel_dim if site.kind == "conv" else -1
        aff = {node: (1.0, [])}
        order = [node]
        for cand in list(rw.graph.nodes)[list(rw.graph.nodes).index(node) + 1:]:
            if not any(isinstance(a, torch.fx.Node) and a in aff for a in cand.args):
                continue
            step = _affine_step(rw, cand, aff, out_shape, channel_dim)
            if step is not None and shape(cand) == out_shape:
                aff[cand] = step
                order.append(cand)
        tops = [n for n in order if any(u not in aff for u in n.users) or not n.users]
        if len(tops) != 1 or tops[0] is node:
            continue
        top = tops[0]
        a, terms = aff[top]
        if a == 1.0 and not terms:
            top.replace_all_uses_with(node)
            rw.notes.append("identity epilogue removed")
            count += 1
            continue
        weight, bias = _fold_expr(site, a, terms)
        w_node = rw.buffer(weight)
        node.prepend(w_node)  # new get_attrs go before the site, so the graph order stays valid
        b_node = None
        if bias is not None:
            b_node = rw.buffer(bias)
            node.prepend(b_node)
        new = _call(rw, site, w_node, b_node, top)
        top.replace_all_uses_with(new)
        rw.notes.append(f"affine epilogue (x{a:g}, {len(terms)} bias terms) folded into {site.kind} weights")
        count += 1
    return count


def fold_linear_reduction(rw: Rewrite) -> int:
    """``sum``/``mean`` over a Linear's output features as one matrix-vector product."""
    count = 0
    for node in list(rw.graph.nodes):
        site = site_of(rw, node)
        out_shape = shape(node)
        if site is None or site.kind != "linear" or out_shape is None or len(node.users) != 1:
            continue
        red = next(iter(node.users))
        name = op_name(red)
        if name not in ("sum", "mean") or red.args[0] is not node or red.kwargs.get("dtype") is not None:
            continue
        dims = dims_of(arg(red, 1, "dim"), len(out_shape))
        if dims != (len(out_shape) - 1,):
            continue
        keepdim = bool(arg(red, 2, "keepdim", False))
        how = "sum" if name == "sum" else "mean"
        weight = f"{site.weight}.{how}(0, keepdim=True)"
        bias = f"{site.bias}.{how}().reshape(1)" if site.bias else None
        w_node = rw.buffer(weight)
        node.prepend(w_node)
        b_node = None
        if bias:
            b_node = rw.buffer(bias)
            node.prepend(b_node)
        new = _call(rw, site, w_node, b_node, red)
        if not keepdim:
            with rw.graph.inserting_after(new):
                new = rw.graph.call_method("squeeze", (new, -1))
        red.replace_all_uses_with(new)
        rw.notes.append(f"{how} over a linear layer's outputs folded into a matrix-vector product")
        count += 1
    return count




def scale_smaller_operand(rw: Rewrite) -> int:
    """``(A @ B) * k`` -> ``(A * k) @ B`` when A has fewer elements than the product (fewer passes)."""
    import operator

    count = 0
    for node in list(rw.graph.nodes):
        if op_name(node) not in ("matmul", "bmm", "mm") or len(node.args) != 2 or len(node.users) != 1:
            continue
        user = next(iter(node.users))
        if op_name(user) not in ("mul", "div") or len(user.args) != 2 or user.kwargs:
            continue
        k = user.args[1] if user.args[0] is node else (user.args[0] if op_name(user) == "mul" else None)
        if not is_number(k) or (op_name(user) == "div" and (user.args[0] is not node or k == 0)):
            continue
        factor = k if op_name(user) == "mul" else 1.0 / k
        sizes = [shape(a) for a in node.args]
        out = shape(node)
        if any(s is None for s in sizes) or out is None:
            continue
        numel = [int(torch.Size(s).numel()) for s in sizes]
        side = 0 if numel[0] <= numel[1] else 1
        if numel[side] >= int(torch.Size(out).numel()):
            continue
        with rw.graph.inserting_before(node):
            scaled = rw.graph.call_function(operator.mul, (node.args[side], factor))
        args = list(node.args)
        args[side] = scaled
        node.args = tuple(args)
        user.replace_all_uses_with(node)
        rw.notes.append("a scalar multiply moved onto the smaller matmul operand")
        count += 1
    return count

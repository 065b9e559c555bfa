"""Exact-up-to-rounding graph identities that need traced shapes: reductions over size-1 dims,
transposes that cancel, and ``diag(v) @ B`` as a broadcast multiply.

Each pass edits the FX graph in place and returns how many sites it rewrote. They never change
what is computed beyond floating-point rounding: a sum, mean, max or logsumexp over a dimension of
size one returns its input; softmax over such a dimension is all ones.
"""

from __future__ import annotations

import operator

import torch

from .nodes import Rewrite, arg, dims_of, module_of, op_name, shape

_IDENTITY_REDUCTIONS = {"sum", "mean", "amax", "amin", "logsumexp", "nansum", "prod", "nanmean"}
_VALUE_INDEX_REDUCTIONS = {"max", "min", "median"}
_ADAPTIVE_POOLS = {"adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
                   "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d"}


def _replace_reduction(rw: Rewrite, node, src, dims: tuple[int, ...],  # type: ignore[no-untyped-def]
                       keepdim: bool) -> None:
    with rw.graph.inserting_after(node):
        new = src if keepdim else rw.graph.call_method("squeeze", (src, dims if len(dims) > 1 else dims[0]))
    node.replace_all_uses_with(new)


def size1_reductions(rw: Rewrite) -> int:
    """Drop reductions, softmaxes and adaptive pools whose reduced dims all have size 1."""
    count = 0
    for node in list(rw.graph.nodes):
        name = op_name(node)
        if name is None or not node.args or not isinstance(node.args[0], torch.fx.Node):
            if node.op == "call_module":
                count += _size1_pool_module(rw, node)
            continue
        src = node.args[0]
        in_shape = shape(src)
        if in_shape is None or not in_shape:
            continue
        if name in _IDENTITY_REDUCTIONS or name in _VALUE_INDEX_REDUCTIONS:
            if node.kwargs.get("dtype") is not None or len(node.args) > 3:
                continue
            dims = dims_of(arg(node, 1, "dim"), len(in_shape))
            keepdim = bool(arg(node, 2, "keepdim", False))
            if dims is None or any(in_shape[d] != 1 for d in dims):
                continue
            if name in _VALUE_INDEX_REDUCTIONS:
                users = list(node.users)
                if not users or not all(op_name(u) == "getitem" and u.args[1] == 0 for u in users):
                    continue  # the indices are used (or the tuple escapes): keep it
                for u in users:
                    _replace_reduction(rw, u, src, dims, keepdim)
            else:
                _replace_reduction(rw, node, src, dims, keepdim)
            rw.notes.append(f"{name} over size-1 dim {list(dims)} removed")
            count += 1
        elif name in ("softmax", "log_softmax"):
            dim = arg(node, 1, "dim")
            dims = dims_of(dim, len(in_shape))
            if dims is None or len(dims) != 1 or in_shape[dims[0]] != 1 or arg(node, 2, "dtype") not in (None, 3):
                continue
            if node.kwargs.get("dtype") is not None:
                continue
            with rw.graph.inserting_after(node):
                fill = "ones_like" if name == "softmax" else "zeros_like"
                new = rw.graph.call_function(getattr(torch, fill), (src,))
            node.replace_all_uses_with(new)
            rw.notes.append(f"{name} over a size-1 dim is constant ({fill})")
            count += 1
        elif name in _ADAPTIVE_POOLS:
            out = shape(node)
            if out is not None and out == in_shape and not arg(node, 2, "return_indices", False):
                node.replace_all_uses_with(src)
                rw.notes.append(f"{name} to the same shape removed")
                count += 1
    return count


def _size1_pool_module(rw: Rewrite, node) -> int:  # type: ignore[no-untyped-def]
    mod = module_of(rw.gm, node)
    if mod is None or not node.args or not isinstance(node.args[0], torch.fx.Node):
        return 0
    kinds = (torch.nn.AdaptiveAvgPool1d, torch.nn.AdaptiveAvgPool2d, torch.nn.AdaptiveAvgPool3d,
             torch.nn.AdaptiveMaxPool1d, torch.nn.AdaptiveMaxPool2d, torch.nn.AdaptiveMaxPool3d)
    if not isinstance(mod, kinds) or getattr(mod, "return_indices", False):
        return 0
    if shape(node) is None or shape(node) != shape(node.args[0]):
        return 0
    node.replace_all_uses_with(node.args[0])
    rw.notes.append(f"{type(mod).__name__} to the same shape removed")
    return 1


def _perm(node) -> tuple[object, tuple[int, ...]] | None:  # type: ignore[no-untyped-def]
    """(input, permutation) of a transpose/t/T/permute node."""
    name = op_name(node)
    if not node.args or not isinstance(node.args[0], torch.fx.Node):
        return None
    src = node.args[0]
    s = shape(src)
    if s is None:
        return None
    n = len(s)
    order = list(range(n))
    if name == "transpose" or name == "swapaxes":
        a, b = arg(node, 1, "dim0"), arg(node, 2, "dim1")
        if not isinstance(a, int) or not isinstance(b, int):
            return None
        a, b = a % n, b % n
        order[a], order[b] = order[b], order[a]
    elif name == "t" or (name == "getattr" and len(node.args) > 1 and node.args[1] == "T"):
        if n != 2:
            return None
        order = [1, 0]
    elif name == "permute":
        dims = node.args[1:] if len(node.args) > 2 else arg(node, 1, "dims")
        if isinstance(dims, (list, tuple)) and len(dims) == n and all(isinstance(d, int) for d in dims):
            order = [d % n for d in dims]
        else:
            return None
    else:
        return None
    return src, tuple(order)


def cancel_transposes(rw: Rewrite) -> int:
    """A permutation applied to a permutation of the same tensor that restores the order."""
    count = 0
    for node in list(rw.graph.nodes):
        outer = _perm(node)
        if outer is None:
            continue
        inner = _perm(outer[0])
        if inner is None:
            continue
        composed = tuple(inner[1][i] for i in outer[1])
        if composed == tuple(range(len(composed))):
            node.replace_all_uses_with(inner[0])
            rw.notes.append("a transpose pair cancelled")
            count += 1
    return count


def diag_matmul(rw: Rewrite) -> int:
    """``diag(v) @ B`` -> ``v[:, None] * B`` and ``B @ diag(v)`` -> ``B * v`` (no dense diagonal)."""
    count = 0
    for node in list(rw.graph.nodes):
        if op_name(node) not in ("matmul", "mm") or len(node.args) != 2:
            continue
        left, right = node.args
        for side, d, other in ((0, left, right), (1, right, left)):
            if not isinstance(d, torch.fx.Node) or op_name(d) != "diag" or len(d.args) != 1:
                continue
            v = d.args[0]
            if not isinstance(v, torch.fx.Node) or shape(v) is None or len(shape(v)) != 1:
                continue
            if shape(other) is None or len(shape(other)) != 2:
                continue
            with rw.graph.inserting_after(node):
                if side == 0:
                    col = rw.graph.call_method("unsqueeze", (v, -1))
                    with rw.graph.inserting_after(col):
                        new = rw.graph.call_function(operator.mul, (col, other))
                else:
                    new = rw.graph.call_function(operator.mul, (other, v))
            node.replace_all_uses_with(new)
            rw.notes.append("diag(v) @ B as a broadcast multiply")
            count += 1
            break
    return count

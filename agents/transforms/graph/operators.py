"""Operator choice: the same computation through a library op that does it in fewer passes.

- ``addmm``: ``A @ B + c`` (2-D) is ``torch.addmm(c, A, B)`` and ``bmm(A, B) + c`` (3-D) is
  ``torch.baddbmm(c, A, B)``: the BLAS call accumulates into ``c`` instead of writing the product
  and reading it back for the add. Equal up to rounding (the add happens inside the GEMM).
- ``channels_last``: a 2-D convolution whose traced input is a contiguous NCHW tensor gets it as
  ``x.contiguous(memory_format=torch.channels_last)``; oneDNN and cuDNN then run their NHWC kernels
  instead of reordering the activations on every call. Values are identical, only strides change.
- ``lt_epilogue`` (CUDA moves only): a 2-D Linear with a bias whose only user is a ReLU, or a GELU
  with ``approximate="tanh"``, is ``torch._addmm_activation(bias, x, W.t(), use_gelu=...)``: on CUDA
  cuBLASLt applies bias and activation in the GEMM's epilogue (its GELU is the tanh form), so the
  activation's kernel and its pass over memory disappear. On the CPU the same call computes the erf
  GELU, which is why only CUDA skills name this pass.

Both read the traced graph (shapes, dtypes, strides) and do nothing where the pattern is absent.
"""

from __future__ import annotations

import torch

from .folding import site_of
from .nodes import Rewrite, arg, module_of, op_name, shape

_CONV2D_FN = {"conv2d"}


def _meta(node):  # type: ignore[no-untyped-def]
    return node.meta.get("tensor_meta") if isinstance(node, torch.fx.Node) else None


def _broadcasts_to(small: tuple, big: tuple) -> bool:
    if len(small) > len(big):
        return False
    return all(s in (1, b) for s, b in zip(small[::-1], big[::-1]))


def fuse_bias_add(rw: Rewrite) -> int:
    """``mm/matmul(A, B) + c`` -> ``addmm(c, A, B)``; ``bmm/matmul(A, B) + c`` -> ``baddbmm(c, A, B)``."""
    count = 0
    for node in list(rw.graph.nodes):
        if op_name(node) not in ("matmul", "mm", "bmm") or len(node.args) != 2 or node.kwargs:
            continue
        if len(node.users) != 1:
            continue
        add = next(iter(node.users))
        if op_name(add) != "add" or len(add.args) != 2 or add.kwargs:
            continue
        other = add.args[1] if add.args[0] is node else add.args[0]
        a, b = node.args
        sa, sb, out, so = shape(a), shape(b), shape(node), shape(other)
        if None in (sa, sb, out, so) or other is node or shape(add) != out:
            continue  # the add must not broadcast the product itself to a larger shape
        if not _broadcasts_to(so, out):
            continue
        metas = [_meta(x) for x in (a, b, other)]
        if any(m is None or m.dtype != metas[0].dtype for m in metas):
            continue  # addmm does not promote types like ``+`` does
        if len(sa) == 2 and len(sb) == 2:
            fn, label = torch.addmm, "addmm"
        elif len(sa) == 3 and len(sb) == 3:
            fn, label = torch.baddbmm, "baddbmm"
        else:
            continue
        with rw.graph.inserting_after(add):
            new = rw.graph.call_function(fn, (other, a, b))
        add.replace_all_uses_with(new)
        rw.notes.append(f"matmul followed by an add as one {label}")
        count += 1
    return count


def _is_conv2d(rw: Rewrite, node) -> bool:  # type: ignore[no-untyped-def]
    if node.op == "call_module":
        return isinstance(module_of(rw.gm, node), (torch.nn.Conv2d, torch.nn.ConvTranspose2d))
    return node.op == "call_function" and op_name(node) in _CONV2D_FN


def conv_channels_last(rw: Rewrite) -> int:
    """A contiguous NCHW input of a 2-D convolution converted to channels_last just before it."""
    count = 0
    for node in list(rw.graph.nodes):
        if not _is_conv2d(rw, node) or not node.args or not isinstance(node.args[0], torch.fx.Node):
            continue
        x = node.args[0]
        meta = _meta(x)
        s = shape(x)
        if meta is None or s is None or len(s) != 4 or meta.memory_format != torch.contiguous_format:
            continue  # already channels_last, or strides the conv must see as they are
        if s[1] == 1 or (s[2] == 1 and s[3] == 1):
            continue  # one channel or 1x1 images: NCHW and NHWC are the same layout
        if op_name(x) == "contiguous":
            continue
        with rw.graph.inserting_before(node):
            conv = rw.graph.call_method("contiguous", (x,), {"memory_format": torch.channels_last})
        node.args = (conv, *node.args[1:])
        rw.notes.append("conv2d input converted to channels_last")
        count += 1
    return count


def _epilogue_activation(rw: Rewrite, act, source) -> bool | None:  # type: ignore[no-untyped-def]
    """``use_gelu`` for an activation cuBLASLt can apply in the epilogue: False for ReLU, True for
    the tanh GELU; None for anything else (the erf GELU included: it differs by up to 5e-4)."""
    mod = module_of(rw.gm, act)
    if mod is not None:
        if isinstance(mod, torch.nn.ReLU):
            return False
        if isinstance(mod, torch.nn.GELU) and mod.approximate == "tanh":
            return True
        return None
    if act.op not in ("call_function", "call_method") or not act.args or act.args[0] is not source:
        return None
    name = op_name(act)
    if name == "relu" and len(act.args) == 1:
        return False
    if name == "gelu" and act.op == "call_function" and arg(act, 1, "approximate", "none") == "tanh":
        return True
    return None


def lt_epilogue(rw: Rewrite) -> int:
    """``relu(linear(x, W, b))`` / ``gelu_tanh(...)`` -> ``torch._addmm_activation(b, x, W.t())``."""
    count = 0
    if not hasattr(torch, "_addmm_activation"):  # a torch that does not expose the epilogue: no move
        return 0
    for node in list(rw.graph.nodes):
        site = site_of(rw, node)
        if site is None or site.kind != "linear" or site.bias is None or len(node.users) != 1:
            continue
        act = next(iter(node.users))
        use_gelu = _epilogue_activation(rw, act, node)
        sx, sw = shape(site.x), shape(node)
        if use_gelu is None or sx is None or sw is None or len(sx) != 2 or len(sw) != 2:
            continue  # cuBLASLt's epilogue takes a 2-D GEMM (3-D inputs would need a reshape)
        if _meta(site.x) is None or not _meta(site.x).dtype.is_floating_point:
            continue
        w_node = rw.buffer(site.weight)
        node.prepend(w_node)
        b_node = rw.buffer(site.bias)
        node.prepend(b_node)
        with rw.graph.inserting_before(act):
            wt = rw.graph.call_method("t", (w_node,))
            new = rw.graph.call_function(torch._addmm_activation, (b_node, site.x, wt), {"use_gelu": use_gelu})
        act.replace_all_uses_with(new)
        rw.notes.append(f"linear + {'tanh GELU' if use_gelu else 'ReLU'} as one cuBLASLt epilogue GEMM")
        count += 1
    return count


__all__ = ["conv_channels_last", "fuse_bias_add", "lt_epilogue"]

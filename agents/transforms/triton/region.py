"""Which part of a traced graph becomes one generated kernel, and what that kernel computes.

The region ends at the model's output and grows backwards over ops the kernels support
(``ops.supported``); a node whose value is also needed outside the region is left out (its value
must exist as a tensor anyway), so what stays in torch is the prefix — a GEMM, a convolution, a
view — whose result the kernel reads. The region is then checked as a whole, and anything the
kernels do not model exactly is refused with the reason (``Unsupported``):

- every reduction in it reduces the same contiguous dims ``[a, b)`` of one domain ``S`` (the shape
  of the reductions' input), and not all of them (one program would do the whole tensor);
- every value has the shape its level implies: ``S`` per element, ``S`` with the reduced dims kept
  (size 1) or dropped per row, one element for a constant; nothing broadcasts beyond ``S``;
- every tensor read from outside is contiguous, has the output's dtype (float32, float16 or
  bfloat16), and varies along one contiguous run of ``S``'s dims (a bias ``(C, 1, 1)``, a
  LayerNorm weight, a residual of shape ``S``); one of them has exactly the shape ``S`` (the launcher
  reads the sizes from it at run time, so no size is baked into the source);
- the output is one tensor computed by at least one op (a region of copies is no kernel).

Layout of the work (``Match.mode``): ``flat`` (no reduction: one program per block of elements),
``row`` (the reduced dims are the last ones: one program per row, blocked columns) or ``column``
(reduced dims in the middle, e.g. channels of NCHW: one program per block of the trailing dims,
looping over the reduced ones, so every load stays coalesced).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field

from ..graph.nodes import op_name
from . import ops
from .plan import Operand, Plan, Unsupported

FLOATS = ("torch.float32", "torch.float16", "torch.bfloat16")


@dataclass
class Match:
    plan: Plan
    root: object  # the FX node whose value the kernel produces
    nodes: list = field(default_factory=list)  # the region, in graph order
    externals: list = field(default_factory=list)  # operand k: an FX node outside, or a parameter path
    main: int = 0  # the operand of shape S: sizes are read from it at run time
    mode: str = "flat"  # flat | row | column
    shape: tuple = ()  # S, the domain, as traced (the generated code reads sizes at run time)

    @property
    def output(self):  # type: ignore[no-untyped-def]
        return self.plan.value(self.plan.output)


def _meta(node):  # type: ignore[no-untyped-def]
    meta = node.meta.get("tensor_meta") if hasattr(node, "meta") else None
    return meta if hasattr(meta, "shape") else None


def _shape(node) -> tuple | None:  # type: ignore[no-untyped-def]
    meta = _meta(node)
    return tuple(int(d) for d in meta.shape) if meta is not None else None


def _contiguous(shape: tuple, stride: tuple) -> bool:
    expected = 1
    for size, st in zip(reversed(shape), reversed(stride)):
        if size != 1 and st != expected:
            return False
        expected *= size
    return True


def _candidates(root) -> set:  # type: ignore[no-untyped-def]
    """Supported nodes reachable backwards from ``root`` through supported nodes, less those whose
    value is also used outside (iterated: leaving one out exposes its inputs' other users)."""
    region, stack = set(), [root]
    while stack:
        n = stack.pop()
        if n in region or not ops.supported(n):
            continue
        region.add(n)
        for a in _node_args(n):
            stack.append(a)
    changed = True
    while changed:
        changed = False
        for n in list(region):
            if n is not root and any(u not in region for u in n.users):
                region.discard(n)
                changed = True
    # what is left must still reach the root through the region
    reach, stack = set(), [root] if root in region else []
    while stack:
        n = stack.pop()
        if n in reach:
            continue
        reach.add(n)
        stack.extend(a for a in _node_args(n) if a in region)
    return reach


def _node_args(node) -> list:  # type: ignore[no-untyped-def]
    import torch.fx

    out = []
    for a in [*node.args, *node.kwargs.values()]:
        if isinstance(a, torch.fx.Node):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(x for x in a if isinstance(x, torch.fx.Node))
    return out


def _domain(nodes: list) -> tuple[tuple | None, tuple[int, int] | None]:  # type: ignore[no-untyped-def]
    """(S, reduced dims) from the region's reductions; (None, None) when it has none."""
    import torch.fx

    shapes, dims = set(), set()
    for n in nodes:
        if not ops.is_reduction(n):
            continue
        src = n.args[0] if n.args else None
        if not isinstance(src, torch.fx.Node) or _shape(src) is None:
            raise Unsupported("a reduction of something that is not a traced tensor")
        s = _shape(src)
        shapes.add(s)
        dims.add(ops.reduction_dims(n, len(s)))
    if not shapes:
        return None, None
    if len(shapes) > 1 or len(dims) > 1:
        raise Unsupported("reductions over different tensors or dims")
    s, d = shapes.pop(), dims.pop()
    if list(d) != list(range(d[0], d[-1] + 1)):
        raise Unsupported(f"reduced dims {d} are not contiguous")
    if d[0] == 0 and d[-1] == len(s) - 1:
        raise Unsupported("a reduction over every dim (one program would do the whole tensor)")
    return s, (d[0], d[-1] + 1)


class _Lowering:
    """Lowers the region node by node, checking shapes and collecting operands."""

    def __init__(self, gm, region: set, S: tuple, dims: tuple[int, int] | None, dtype: str):  # type: ignore[no-untyped-def]
        self.gm, self.region, self.S, self.dims, self.dtype = gm, region, S, dims, dtype
        self.plan = Plan(len(S), *(dims or (None, None)))
        self.names: dict = {}
        self.externals: list = []
        self.low = ops.Lowerer(self.plan, gm, self.value_of)

    # --- operands --------------------------------------------------------------------------
    def _external_tensor(self, key):  # type: ignore[no-untyped-def]
        """(shape, stride, dtype) of an external node or parameter path."""
        if isinstance(key, str):
            try:
                t = self.gm.get_parameter(key)
            except AttributeError:
                t = self.gm.get_buffer(key)
            return tuple(t.shape), tuple(t.stride()), str(t.dtype)
        meta = _meta(key)
        if meta is None:
            raise Unsupported(f"{key.name} is not a traced tensor")
        return tuple(int(d) for d in meta.shape), tuple(int(s) for s in meta.stride), str(meta.dtype)

    def value_of(self, x) -> str:  # type: ignore[no-untyped-def]
        if x in self.names:
            return self.names[x]
        if not isinstance(x, str) and x in self.region:
            raise Unsupported("a region node used before it is computed")
        if x in self.externals:
            return self.plan.load(self.plan.operands[self.externals.index(x)])
        shape, stride, dtype = self._external_tensor(x)
        if dtype != self.dtype:
            raise Unsupported(f"an operand of dtype {dtype} in a {self.dtype} region (type promotion)")
        if not _contiguous(shape, stride):
            raise Unsupported("a non-contiguous operand (the kernel would need a copy first)")
        operand = self._classify(shape)
        self.externals.append(x)
        self.plan.operands.append(operand)
        return self.plan.load(operand)

    def _classify(self, shape: tuple) -> Operand:
        S, ndim = self.S, len(self.S)
        if len(shape) > ndim:
            raise Unsupported("an operand with more dims than the result")
        full = (1,) * (ndim - len(shape)) + shape
        varying = [d for d in range(ndim) if full[d] != 1]
        if any(full[d] != S[d] for d in varying):
            raise Unsupported(f"an operand of shape {shape} that does not broadcast to {S}")
        index = len(self.plan.operands)
        if not varying:
            return Operand(index, "const", 0, 0)
        lo, hi = varying[0], varying[-1] + 1
        if any(full[d] != S[d] for d in range(lo, hi)):
            raise Unsupported(f"an operand of shape {shape} broadcast along dims in between its own")
        if self.dims is None:
            level = "full"
        else:
            a, b = self.dims
            level = "row" if hi <= a or lo >= b else "full"
        return Operand(index, level, lo, hi)

    # --- nodes -----------------------------------------------------------------------------
    def lower(self, node) -> None:  # type: ignore[no-untyped-def]
        if node.op == "call_function" and node.target in (operator.getitem, getattr):
            self._values_of(node)
            return
        if _shape(node) is None and op_name(node) not in ("max", "min"):
            raise Unsupported(f"{node.name} is not a single traced tensor")
        name = ops.lower(self.low, node)
        self.names[node] = name
        if _shape(node) is not None:
            self._check(node, name)

    def _values_of(self, node) -> None:  # type: ignore[no-untyped-def]
        src, key = node.args[0], node.args[1]
        if src not in self.names or op_name(src) not in ("max", "min") or key not in (0, "values"):
            raise Unsupported("indexing anything but the values of max/min(x, dim)")
        self.names[node] = self.names[src]
        self._check(node, self.names[node])

    def _check(self, node, name: str) -> None:  # type: ignore[no-untyped-def]
        meta = _meta(node)
        if str(meta.dtype) != self.dtype:
            raise Unsupported(f"{node.name} has dtype {meta.dtype}, not the region's {self.dtype}")
        got = _shape(node)
        value = self.plan.value(name) if self.plan.has(name) else None
        level = value.level if value is not None else "const"
        if level == "full":
            want = self.S
        elif level == "row":
            a, b = self.plan.reduce_lo, self.plan.reduce_hi
            want = self.S[:a] + (1,) * (b - a) + self.S[b:] if value.keep else self.S[:a] + self.S[b:]
        else:
            want = got if math.prod(got) == 1 else None
        if got != want:
            raise Unsupported(f"{node.name} has shape {got} where the kernel computes {want}")


def match(gm) -> Match:  # type: ignore[no-untyped-def]
    """The kernel region of ``gm``'s output; Unsupported (with the reason) when there is none."""
    import torch.fx

    out = next(n for n in gm.graph.nodes if n.op == "output")
    root = out.args[0]
    if not isinstance(root, torch.fx.Node):
        raise Unsupported("the model returns more than one tensor")
    region = _candidates(root)
    if not region:
        raise Unsupported(f"the output comes from {op_name(root) or root.op}, which no kernel computes")
    nodes = [n for n in gm.graph.nodes if n in region]
    root_meta = _meta(root)
    if root_meta is None or str(root_meta.dtype) not in FLOATS:
        raise Unsupported("the output is not a float32/float16/bfloat16 tensor")
    S, dims = _domain(nodes)
    if S is None:
        S = _shape(root)
    lowering = _Lowering(gm, region, S, dims, str(root_meta.dtype))
    for n in nodes:
        lowering.lower(n)
    plan = lowering.plan
    plan.output = lowering.names[root]
    result = plan.value(plan.output)
    if result.operand is not None or result.level == "const":
        raise Unsupported("the region computes nothing (copies of its input only)")
    mains = [o.index for o in plan.operands if o.level == "full"
             and lowering._external_tensor(lowering.externals[o.index])[0] == S]
    if not mains:
        raise Unsupported("no operand has the full shape to read the sizes from")
    mode = "flat" if dims is None else ("row" if dims[1] == len(S) else "column")
    return Match(plan, root, nodes, lowering.externals, mains[0], mode, tuple(S))

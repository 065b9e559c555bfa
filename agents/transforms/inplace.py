"""``inplace_elementwise``: reuse a freshly allocated intermediate instead of allocating another.

``y = torch.relu(y)`` allocates a new tensor and drops the old one; ``y = y.relu_()`` writes into
the buffer that is already there, saving an allocation and a pass of memory traffic per op on
memory-bound chains (conv -> scale -> bias -> activation, KernelBench level 2). The rewrite is only
sound when nothing else can observe ``y``'s old contents, which is what this module proves, very
conservatively, by a straight-line data-flow walk over ``forward``:

* ``y`` must be a local bound in forward from an op known to return a *new* tensor (whitelisted
  torch functions/methods, arithmetic on a tensor, known allocating modules such as nn.Conv2d).
  Forward arguments, attributes (parameters, buffers) and views (``view``, ``reshape``,
  ``transpose``, ``[...]``, ``.T``, ``.float()``/``.to()`` which may return ``self``) are never
  fresh. Mutating a forward argument would change the caller's inputs: a reward hack.
* between its binding and the rewrite, ``y`` may only be read by ops that cannot keep an alias
  (arithmetic, whitelisted allocating calls, metadata such as ``y.shape``). Any other use
  (``z = y``, ``y.view(...)``, passing it to an unknown function, use inside a loop or branch)
  makes ``y`` unusable for the rest of the walk.
* the other operands must not mention ``y`` (``y + y.t()`` would overlap reads and writes).

Failures that remain possible are loud, never silent: an in-place op whose broadcast result is
larger than ``y`` or whose result dtype differs raises at run time, and autograd may refuse a
backward through an op whose saved output was overwritten (KernelBench measures forward only).
"""

from __future__ import annotations

import ast

from .base import compute_method, dotted, find_class, find_method, parse, register, render

_TORCH_PREFIXES = ("torch.", "torch.nn.functional.", "F.", "nn.functional.")

# Tensor ops with an in-place twin ``op_`` whose first argument is the tensor written.
_INPLACE_OPS = frozenset(
    "add sub mul div pow neg abs exp log sqrt rsqrt sigmoid tanh relu clamp clip sin cos erf "
    "floor ceil round reciprocal square sign masked_fill lerp addcmul addcdiv fmod remainder "
    "exp2 expm1 log1p log2 trunc frac".split()
)
# torch.nn.functional activations that accept ``inplace=True``; value: how many positional
# arguments may follow the input before the positional ``inplace`` slot.
_INPLACE_KW: dict[str, int] = {
    **dict.fromkeys(("relu", "selu", "relu6", "silu", "mish", "hardswish", "hardsigmoid"), 0),
    "leaky_relu": 1, "elu": 1, "celu": 1, "hardtanh": 2,
}
# Calls (torch.X / F.X / tensor.X()) that always return a newly allocated tensor.
_FRESH_OPS = _INPLACE_OPS | frozenset(
    "matmul mm bmm addmm baddbmm einsum linear bilinear conv1d conv2d conv3d conv_transpose1d "
    "conv_transpose2d conv_transpose3d cat stack softmax log_softmax gelu silu mish softplus "
    "leaky_relu hardtanh elu selu celu relu6 hardswish hardsigmoid logsigmoid tanhshrink "
    "layer_norm group_norm batch_norm instance_norm rms_norm avg_pool1d avg_pool2d avg_pool3d "
    "max_pool1d max_pool2d max_pool3d sum mean prod logsumexp cumsum cumprod amax amin "
    "clone zeros_like ones_like full_like minimum maximum".split()
)
# nn modules whose call always allocates its output; value: index of a positional ``inplace``
# parameter (such modules are fresh only when not constructed in-place), or None.
_FRESH_MODULES: dict[str, int | None] = {
    **{m: None for m in (
        "Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d Linear Bilinear "
        "BatchNorm1d BatchNorm2d BatchNorm3d LayerNorm GroupNorm InstanceNorm1d InstanceNorm2d "
        "InstanceNorm3d RMSNorm AvgPool1d AvgPool2d AvgPool3d MaxPool1d MaxPool2d MaxPool3d "
        "Embedding Softmax LogSoftmax GELU Sigmoid Tanh Softplus".split()
    )},
    "ReLU": 0, "ReLU6": 0, "SELU": 0, "SiLU": 0, "Mish": 0, "Hardswish": 0, "Hardsigmoid": 0,
    "LeakyReLU": 1, "ELU": 1, "CELU": 1, "Hardtanh": 2,
}
_META_ATTRS = frozenset("shape dtype device ndim is_cuda requires_grad size dim numel stride".split())


def _torch_op(func: ast.expr) -> str | None:
    name = dotted(func)
    if name is None:
        return None
    for prefix in _TORCH_PREFIXES:
        if name.startswith(prefix) and "." not in name[len(prefix):]:
            return name[len(prefix):]
    return None


def _fresh_modules(cls: ast.ClassDef) -> set[str]:
    """Attributes ``self.<name>`` assigned exactly once in __init__ to an allocating nn module."""
    init = find_method(cls, "__init__")
    seen: dict[str, int] = {}
    fresh: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Attribute) and dotted(sub.value) == "self":
                        seen[sub.attr] = seen.get(sub.attr, 0) + 1
    if init is None:
        return fresh
    for node in init.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call)):
            continue
        target, call = node.targets[0], node.value
        if not (isinstance(target, ast.Attribute) and dotted(target.value) == "self"):
            continue
        kind = (dotted(call.func) or "").split(".")[-1]
        if kind not in _FRESH_MODULES or seen.get(target.attr) != 1:
            continue
        pos = _FRESH_MODULES[kind]
        kwargs = {k.arg for k in call.keywords}
        if "inplace" in kwargs or "return_indices" in kwargs or (pos is not None and len(call.args) > pos):
            continue
        fresh.add(target.attr)
    return fresh


class _Flow:
    """Which local names currently hold a tensor nobody else references."""

    def __init__(self, modules: set[str], args: set[str]) -> None:
        self.modules = modules
        self.args = args
        self.fresh: set[str] = set()

    # -- classification of expressions
    def is_fresh_call(self, node: ast.expr) -> bool:
        if not isinstance(node, ast.Call):
            return False
        if any(k.arg in ("inplace", "out", "return_indices") for k in node.keywords):
            return False
        op = _torch_op(node.func)
        if op is not None:
            return op in _FRESH_OPS
        if isinstance(node.func, ast.Attribute):
            recv = node.func.value
            if dotted(recv) == "self":
                return node.func.attr in self.modules
            if node.func.attr in _FRESH_OPS and self.is_tensor(recv):
                return True
        return False

    def is_tensor(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.fresh or node.id in self.args
        return self.is_fresh(node)

    def is_fresh(self, node: ast.expr) -> bool:
        if isinstance(node, ast.BinOp):
            return self.is_tensor(node.left) or self.is_tensor(node.right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Invert)):
            return self.is_tensor(node.operand)
        return self.is_fresh_call(node)

    # -- does an expression keep a reference to `name` beyond its own evaluation?
    def leaks(self, node: ast.AST, name: str) -> bool:
        def operand(n: ast.AST) -> bool:
            return not (isinstance(n, ast.Name) and n.id == name) and self.leaks(n, name)

        if isinstance(node, ast.Name):
            return node.id == name
        if isinstance(node, ast.BinOp):
            return operand(node.left) or operand(node.right)
        if isinstance(node, ast.UnaryOp):
            return operand(node.operand)
        if isinstance(node, ast.Compare):
            return operand(node.left) or any(operand(c) for c in node.comparators)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr in _META_ATTRS:
            return False
        if isinstance(node, ast.Call) and (
            self.is_fresh_call(node)
            or (isinstance(node.func, ast.Attribute) and node.func.attr in _META_ATTRS)
        ):
            func = node.func
            func_leaks = operand(func.value) if isinstance(func, ast.Attribute) else self.leaks(func, name)
            return func_leaks or any(operand(a) for a in node.args) or any(
                operand(k.value) for k in node.keywords
            )
        return any(self.leaks(child, name) for child in ast.iter_child_nodes(node))


def _inplace_value(value: ast.expr, name: str) -> ast.expr | None:
    """The in-place form of ``value`` writing into ``name``, or None."""

    def is_y(n: ast.AST) -> bool:
        return isinstance(n, ast.Name) and n.id == name

    def mentions(n: ast.AST) -> bool:
        return any(isinstance(s, ast.Name) and s.id == name for s in ast.walk(n))

    def method(op: str, args: list[ast.expr], kws: list[ast.keyword]) -> ast.expr | None:
        if any(mentions(a) for a in args) or any(mentions(k.value) for k in kws):
            return None
        return ast.Call(ast.Attribute(ast.Name(name, ast.Load()), op + "_", ast.Load()), args, kws)

    if isinstance(value, ast.BinOp):
        ops = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow"}
        op = ops.get(type(value.op))
        if op is None:
            return None
        if is_y(value.left):
            return method(op, [value.right], [])
        if is_y(value.right) and op in ("add", "mul"):
            return method(op, [value.left], [])
        return None
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub) and is_y(value.operand):
        return method("neg", [], [])
    if not isinstance(value, ast.Call) or any(k.arg in ("inplace", "out") for k in value.keywords):
        return None
    op = _torch_op(value.func)
    if op is not None and value.args and is_y(value.args[0]):
        rest = value.args[1:]
        if any(isinstance(a, ast.Starred) for a in rest):
            return None
        if op in _INPLACE_OPS and dotted(value.func).startswith("torch.") and "functional" not in dotted(value.func):
            return method(op, rest, value.keywords)
        if op in _INPLACE_KW and len(rest) <= _INPLACE_KW[op]:
            if any(mentions(a) for a in rest) or any(mentions(k.value) for k in value.keywords):
                return None
            kws = [*value.keywords, ast.keyword("inplace", ast.Constant(True))]
            return ast.Call(value.func, [ast.Name(name, ast.Load()), *rest], kws)
        if op in _INPLACE_OPS and op in ("relu", "sigmoid", "tanh"):  # F.relu(y) etc. without kw
            return method(op, rest, value.keywords)
        return None
    if isinstance(value.func, ast.Attribute) and is_y(value.func.value) and value.func.attr in _INPLACE_OPS:
        return method(value.func.attr, value.args, value.keywords)
    return None


def _walk(body: list[ast.stmt], flow: _Flow) -> int:
    count = 0
    for st in body:
        if (
            isinstance(st, ast.Assign)
            and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)
        ):
            name = st.targets[0].id
            new = _inplace_value(st.value, name) if name in flow.fresh else None
            if new is not None:
                others = [n for n in flow.fresh if n != name and flow.leaks(st.value, n)]
                flow.fresh.difference_update(others)
                st.value = ast.copy_location(new, st.value)
                count += 1
                continue  # `name` still holds the same, still unaliased, buffer
            fresh = flow.is_fresh(st.value)
            flow.fresh.difference_update({n for n in flow.fresh if flow.leaks(st.value, n)})
            flow.fresh.discard(name)
            if fresh:
                flow.fresh.add(name)
            continue
        if isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Name):
            flow.fresh.difference_update({n for n in flow.fresh if flow.leaks(st.value, n)})
            continue
        if isinstance(st, ast.Return):
            break
        # Anything else (branches, loops, with, tuple targets, bare calls): forget every name it
        # mentions, since reasoning about aliasing there is not worth the risk.
        flow.fresh.difference_update({n.id for n in ast.walk(st) if isinstance(n, ast.Name)})
    return count


def _validate(params: dict) -> None:
    if params:
        raise ValueError(f"inplace_elementwise takes no params, got {sorted(params)}")


@register("inplace_elementwise", validate=_validate)
def inplace_elementwise(source: str, params: dict) -> str | None:
    """Rewrite ``y = op(y, ...)`` in ModelNew's forward to ``y = y.op_(...)`` where provably safe.

    Safe per the module docstring: only locals freshly allocated inside forward and not aliased
    since are written; forward arguments, parameters and views never are. No params.
    """
    _validate(params)
    tree = parse(source)
    cls = find_class(tree) if tree is not None else None
    fn = compute_method(cls) if cls is not None else None
    if tree is None or cls is None or fn is None:
        return None
    args = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    args.discard("self")
    flow = _Flow(_fresh_modules(cls), args)
    if _walk(fn.body, flow) == 0:
        return None
    return render(tree)

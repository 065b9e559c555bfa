"""``channels_last``: run 2-D convolutions in NHWC memory format.

cuDNN (tensor cores) and oneDNN on CPU both prefer NHWC for convolutions; in NCHW they insert
layout conversions or pick slower kernels. Converting the weights once in ``__init__`` and the
4-D inputs at the top of forward lets every conv and the elementwise ops between them stay in
NHWC. Values are unchanged, only strides differ, so the correctness check (allclose on values)
is unaffected.
"""

from __future__ import annotations

import ast

from .base import (
    append_to_init,
    compute_method,
    dotted,
    ensure_imports,
    ensure_init,
    find_class,
    parse,
    register,
    render,
    stmt,
)

_CONV2D = {"Conv2d", "ConvTranspose2d", "LazyConv2d", "LazyConvTranspose2d"}


def _uses_conv2d(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = dotted(node.func) or ""
            if name.split(".")[-1] in _CONV2D or name in ("F.conv2d", "torch.nn.functional.conv2d", "torch.conv2d"):
                return True
    return False


def _mentions_channels_last(cls: ast.ClassDef) -> bool:
    return any(
        isinstance(n, ast.Attribute) and n.attr == "channels_last" and dotted(n.value) == "torch"
        for n in ast.walk(cls)
    )


def _validate(params: dict) -> None:
    if params:
        raise ValueError(f"channels_last takes no params, got {sorted(params)}")


@register("channels_last", validate=_validate)
def channels_last(source: str, params: dict) -> str | None:
    """Convert ModelNew's parameters and 4-D tensor arguments to ``torch.channels_last``.

    Appends ``self.to(memory_format=torch.channels_last)`` to ``__init__`` and, at the top of
    forward (``_forward_eager`` once compiled), rebinds each named argument that is a 4-D tensor to
    ``arg.contiguous(memory_format=torch.channels_last)``, a copy, so the caller's inputs are never
    modified. Safe: values are identical; only layout and speed change. Outputs may come back in
    NHWC strides, which value comparisons ignore. None when the source has no 2-D convolution or
    ModelNew already mentions ``torch.channels_last``.
    """
    _validate(params)
    tree = parse(source)
    cls = find_class(tree) if tree is not None else None
    if tree is None or cls is None or not _uses_conv2d(tree) or _mentions_channels_last(cls):
        return None
    fn = compute_method(cls)
    if fn is None:
        return None
    append_to_init(ensure_init(cls), stmt("self.to(memory_format=torch.channels_last)"))
    names = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs] if a.arg != "self"]
    converts = [
        stmt(
            f"if isinstance({n}, torch.Tensor) and {n}.dim() == 4:\n"
            f"    {n} = {n}.contiguous(memory_format=torch.channels_last)"
        )
        for n in names
    ]
    start = 1 if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) else 0
    fn.body[start:start] = converts
    ensure_imports(tree, {"torch"})
    return render(tree)

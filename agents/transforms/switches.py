"""``scoped_switch``: turn a backend switch on for the candidate's own calls only.

Some library settings speed up a candidate without changing what it computes — cuDNN's
``benchmark`` mode times the convolution algorithms for each new shape once and keeps the fastest
(all of them exact, under the same precision switches), where the default picks one by heuristic.
Set process-wide they would also reach the reference, so the move sets the switch at the top of
``forward`` and puts the previous value back in a ``finally``: the harness, which runs every
reference call under the switches it had before the candidate was imported and treats these as
the candidate's own (``process_state.OWN``), sees nothing left switched after any call, and the
guard accepts the assignment (``guard.OWN_SWITCHES``).

Only switches in ``SWITCHES`` can be named: each is a setting that changes speed, never values or
precision (precision switches follow the campaign's precision mode and are not moves).
"""

from __future__ import annotations

import ast

from .base import dotted, ensure_imports, find_class, find_method, parse, register, render, stmt

SWITCHES = {  # name -> (the attribute set, the value the candidate's calls run with)
    "cudnn_benchmark": ("torch.backends.cudnn.benchmark", True),
}


def _calls_conv(tree: ast.Module) -> bool:
    """cuDNN's autotuner only times convolutions: a module without one has nothing to tune."""
    return any(isinstance(n, ast.Call) and "conv" in (dotted(n.func) or "").split(".")[-1].lower()
               for n in ast.walk(tree))


NEEDS = {"cudnn_benchmark": _calls_conv}  # what the module must contain for the switch to matter


def _validate(params: dict) -> None:
    unknown = set(params) - {"switch"}
    if unknown or params.get("switch") not in SWITCHES:
        raise ValueError(f"scoped_switch needs exactly one param, switch: one of {', '.join(SWITCHES)}")


def _sets(cls: ast.ClassDef, path: str) -> bool:
    return any(isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and dotted(n) == path
               for n in ast.walk(cls))


@register("scoped_switch", validate=_validate)
def scoped_switch(source: str, params: dict) -> str | None:
    """Wrap ModelNew.forward (the public one: a compiled or graphed candidate's trampoline too) in
    ``previous = <switch>; <switch> = value; try: <body> finally: <switch> = previous``.

    None when ModelNew already sets that switch anywhere, or the module has nothing the switch
    acts on (``NEEDS``: no convolution for cuDNN's autotuner).
    """
    _validate(params)
    path, value = SWITCHES[params["switch"]]
    tree = parse(source)
    cls = find_class(tree) if tree is not None else None
    forward = find_method(cls, "forward") if cls is not None else None
    if tree is None or cls is None or forward is None or _sets(cls, path) or not NEEDS[params["switch"]](tree):
        return None
    body = list(forward.body)
    doc = []
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        doc, body = body[:1], body[1:]
    if not body:
        return None
    saved = f"_previous_{params['switch']}"
    wrapped = stmt(f"try:\n    pass\nfinally:\n    {path} = {saved}")
    assert isinstance(wrapped, ast.Try)
    wrapped.body = body
    forward.body = [*doc, stmt(f"{saved} = {path}"), stmt(f"{path} = {value!r}"), wrapped]
    ensure_imports(tree, {"torch"})
    return render(tree)

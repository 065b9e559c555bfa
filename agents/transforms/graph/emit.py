"""Turning a rewritten FX graph back into a plain, readable ``ModelNew`` source.

The new ``forward`` is the graph's own Python code (``torch.fx`` names every intermediate), the
original ``__init__`` is kept (same parameters, same random draws as the reference) and gains one
``register_buffer`` line per folded weight. A rewrite is refused when the emitted code would bake a
size into the source: the candidate is traced again with its module-level sizes halved, and both
traces must produce the same code, because the campaign may run the problem at another size.
"""

from __future__ import annotations

import ast
import builtins
import copy
import re

from .nodes import Rewrite
from .trace import Traced, trace

_PATH = re.compile(r"^self((?:\.[A-Za-z_][A-Za-z0-9_]*)+)$")
_ALLOWED_FREE = {"torch", "self"}


def scaled_source(source: str, factor: float = 0.5) -> str | None:
    """``source`` with module-level int sizes >= 16 multiplied by ``factor`` (derived globals follow)."""
    tree = ast.parse(source)
    changed = False
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and type(node.value.value) is int
                and node.value.value >= 16):
            node.value = ast.Constant(max(1, int(round(node.value.value * factor))))
            changed = True
    return ast.unparse(tree) if changed else None


def _strip_frees(fn: ast.FunctionDef) -> None:
    """Drop FX's ``a = b = None`` memory-release statements: plain code reads better without them."""
    body = []
    for st in fn.body:
        if isinstance(st, ast.Assign) and isinstance(st.value, ast.Constant) and st.value.value is None:
            continue
        body.append(st)
    fn.body = body


def _free_names(fn: ast.FunctionDef) -> set[str]:
    bound = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    if fn.args.vararg:
        bound.add(fn.args.vararg.arg)
    if fn.args.kwarg:
        bound.add(fn.args.kwarg.arg)
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    loaded = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loaded - bound - set(dir(builtins))


def forward_code(rw: Rewrite) -> tuple[ast.FunctionDef, dict[str, str]] | None:
    """The rewritten forward and the buffers it reads, or None when the graph cannot be emitted."""
    graph = rw.graph
    graph.eliminate_dead_code()
    graph.lint()
    used = {str(n.target) for n in graph.nodes if n.op == "get_attr"}
    for target in used:
        if target.startswith("_folded_"):
            continue
        if not target.replace(".", "").replace("_", "").isalnum() or target.startswith("_tensor_constant"):
            return None  # a constant captured during tracing has no source to be rebuilt from
    text = graph.python_code(root_module="self").src.replace("torch._C._nn.", "torch.nn.functional.")
    fn = ast.parse(text.strip()).body[0]
    if not isinstance(fn, ast.FunctionDef):
        return None
    fn.returns = None  # FX mangles annotations into globals; the original ones are restored later
    for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]:
        a.annotation = None
    if _free_names(fn) - _ALLOWED_FREE:
        return None
    _strip_frees(fn)
    buffers = {k: v for k, v in rw.buffers.items() if k in used}
    return fn, buffers


def _registration(buffers: dict[str, str]) -> list[ast.stmt]:
    if not buffers:
        return []
    lines = ["with torch.no_grad():"]
    for name, expression in buffers.items():
        lines.append(f"    self.register_buffer({name!r}, ({expression}).detach().clone(), persistent=False)")
    return ast.parse("\n".join(lines)).body


def render_source(traced: Traced, fn: ast.FunctionDef, buffers: dict[str, str]) -> str:
    tree = copy.deepcopy(traced.tree)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    old = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    if old is None:
        raise ValueError("ModelNew has no forward")
    fn.decorator_list = old.decorator_list
    fn.returns = old.returns
    hints = {a.arg: a.annotation for a in [*old.args.posonlyargs, *old.args.args, *old.args.kwonlyargs]}
    for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]:
        a.annotation = hints.get(a.arg)
    cls.body[cls.body.index(old)] = fn
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if buffers:
        if init is None:
            raise ValueError("ModelNew has no __init__")
        index = len(init.body) - (1 if init.body and isinstance(init.body[-1], ast.Return) else 0)
        init.body[index:index] = _registration(buffers)
    if not any(isinstance(n, ast.Import) and any(a.name == "torch" and a.asname is None for a in n.names)
               for n in tree.body):
        tree.body.insert(0, ast.parse("import torch").body[0])
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n"


def rewrite_source(source: str, run) -> tuple[str, list[str]] | None:  # type: ignore[no-untyped-def]
    """Apply ``run(rw) -> changed count`` to ``source``'s traced graph; the new source and notes."""
    full = trace(source)
    if full is None:
        return None
    rw = Rewrite(copy.deepcopy(full.gm), full.inputs)
    if not run(rw):
        return None
    emitted = forward_code(rw)
    if emitted is None:
        return None
    small_src = scaled_source(source)
    if small_src is not None:  # the same rewrite must come out of a smaller instance of the problem
        small = trace(small_src)
        if small is None:
            return None
        rw_small = Rewrite(copy.deepcopy(small.gm), small.inputs)
        run(rw_small)
        other = forward_code(rw_small)
        if other is None or ast.dump(other[0]) != ast.dump(emitted[0]) or other[1] != emitted[1]:
            return None
    return render_source(full, *emitted), rw.notes

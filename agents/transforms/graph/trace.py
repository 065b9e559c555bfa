"""Trace a candidate's ModelNew into a torch.fx graph with shapes, cheaply, in the agent process.

Graph moves need facts the source alone does not give (is this reduction over a size-1 dim? is
this module a Linear whose output only feeds a sum?). The candidate module is executed with every
tensor factory on the ``meta`` device, so building a model with huge weights and running shape
propagation allocates nothing and takes milliseconds. Only plain module-level statements are run
(imports, assignments, defs, classes); anything else, any exception, or a graph FX cannot trace
means "no graph", and the graph moves simply do not apply.
"""

from __future__ import annotations

import ast
import hashlib
import types
from dataclasses import dataclass, field

MAX_CACHE = 64
_ALLOWED_TOP = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.FunctionDef, ast.ClassDef, ast.Expr)


@dataclass
class Traced:
    """A traced ModelNew: its GraphModule (meta weights), the model, and the class's AST."""

    gm: object
    model: object
    tree: ast.Module
    cls: ast.ClassDef
    inputs: list = field(default_factory=list)  # meta tensors, for shape propagation after a pass
    notes: list[str] = field(default_factory=list)


_CACHE: dict[str, Traced | None] = {}


_SAFE_IMPORTS = {"torch", "math", "numpy", "typing", "functools", "collections", "itertools", "operator",
                 "dataclasses", "__future__", "numbers"}
_SAFE_CALLS = {"int", "float", "tuple", "list", "dict", "range", "len", "max", "min", "round", "abs", "pow"}


def _call_name(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _plain_module(tree: ast.Module) -> bool:
    """Only definitions, safe imports and assignments of plain values run in the agent's process:
    an extension build (``load_inline``), a download or a subprocess at import time never does."""
    for node in tree.body:
        if not isinstance(node, _ALLOWED_TOP):
            return False
        if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant):
            return False  # a bare call at import time (printing, seeding, downloads) is not run here
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] not in _SAFE_IMPORTS for a in node.names):
            return False
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] not in _SAFE_IMPORTS:
            return False
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
                name = _call_name(call.func)
                if name not in _SAFE_CALLS and not (name.startswith("torch.") and "load" not in name
                                                    and "extension" not in name and "compile" not in name):
                    return False
        if isinstance(node, ast.ClassDef):
            for dec in node.decorator_list:
                if not isinstance(dec, (ast.Name, ast.Attribute)):
                    return False
    return True


def _compiled(cls: ast.ClassDef) -> bool:
    return any(isinstance(n, ast.FunctionDef) and n.name == "_forward_eager" for n in cls.body)


def trace(source: str) -> Traced | None:
    """The traced graph of ``source``'s ModelNew, or None when it cannot be traced safely."""
    key = hashlib.sha256(source.encode()).hexdigest()
    if key not in _CACHE:
        if len(_CACHE) >= MAX_CACHE:
            _CACHE.pop(next(iter(_CACHE)))
        try:
            _CACHE[key] = _trace(source)
        except Exception:  # noqa: BLE001 - any failure means the graph moves do not apply
            _CACHE[key] = None
    return _CACHE[key]


def _trace(source: str) -> Traced | None:
    import torch
    import torch.fx as fx
    from torch.fx.passes.shape_prop import ShapeProp

    tree = ast.parse(source)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    if cls is None or not _plain_module(tree) or _compiled(cls):
        return None
    module = types.ModuleType("arbor_graph_candidate")
    with torch.device("meta"):
        exec(compile(tree, "<candidate>", "exec"), module.__dict__)  # noqa: S102 - meta tensors only
        init = list(module.get_init_inputs())
        model = module.ModelNew(*init)
        inputs = list(module.get_inputs())
    if not isinstance(model, torch.nn.Module):
        return None
    model.eval()
    gm = fx.symbolic_trace(model)
    ShapeProp(gm).propagate(*inputs)
    return Traced(gm=gm, model=model, tree=tree, cls=cls, inputs=inputs)


def shape(node) -> tuple | None:  # type: ignore[no-untyped-def]
    """The traced output shape of an FX node, None when it is not a single tensor."""
    meta = node.meta.get("tensor_meta") if hasattr(node, "meta") else None
    s = getattr(meta, "shape", None)
    return tuple(int(d) for d in s) if s is not None else None

"""Source-to-source transforms that carry out skills' moves (docs/architecture.md#skills).

The heuristic specialist never writes code itself: a skill's move names a transform registered
here plus params, so a skill author adds knobs in YAML and the campaign stays deterministic.
Importing this package registers every transform family.
"""

from __future__ import annotations

import ast

from . import cpp, cuda_graphs, graph, inplace, knobs, layout, patterns, switches, template, triton, wrappers  # noqa: F401  (registration side effects)
from .base import (
    MODEL_CLASS,
    Transform,
    get_transform,
    register,
    render,
    same_tree,
    transform_names,
    validate_params,
)

__all__ = [
    "Transform",
    "apply_move",
    "get_transform",
    "register",
    "to_modelnew",
    "transform_names",
    "validate_params",
]


class _RenameModel(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == "Model":
            node.id = MODEL_CLASS
        return node


def to_modelnew(reference_source: str) -> str:
    """Turn a KernelBench reference into the baseline candidate: ``class Model`` -> ``ModelNew``.

    Every ``Model`` name inside the class (``super(Model, self).__init__()``, type hints) is
    renamed too; globals, helpers and ``get_inputs``/``get_init_inputs`` keep their semantics. The
    baseline candidate is thus the reference itself, which every move then starts from.
    Raises ValueError when there is no ``class Model`` or ``ModelNew`` already exists.
    """
    tree = ast.parse(reference_source)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    if MODEL_CLASS in classes:
        raise ValueError(f"source already defines class {MODEL_CLASS}")
    model = classes.get("Model")
    if model is None:
        raise ValueError("source defines no top-level class Model (KernelBench format expected)")
    model.name = MODEL_CLASS
    for child in model.body:
        _RenameModel().visit(child)
    for deco in model.decorator_list:
        _RenameModel().visit(deco)
    return render(tree)


def apply_move(source: str, transform: str, params: dict) -> str | None:
    """Apply one move; None when the transform does not apply or leaves the AST unchanged."""
    result = get_transform(transform)(source, dict(params or {}))
    if result is None or result == source:
        return None
    if result.lstrip().startswith("{") and source.lstrip().startswith("{"):
        return result  # canonical JSON configs: different text is a different config (no AST to compare)
    return None if same_tree(result, source) else result

"""Transform registry and the AST helpers every transform family shares.

A *transform* is a pure function ``(ModelNew source, params) -> new source | None``. Skills name
transforms in their moves, so the offline heuristic specialist can rewrite a candidate without an
LLM and stay deterministic: same source and params, same output (``ast.unparse`` of a tree built
only from the input). ``None`` means "not applicable / nothing changed", never an error, so a
specialist can try every move on every candidate and simply skip the ones that do not fit.
Transforms raise ``ValueError`` only for bad *params* (a skill author's mistake), which the skill
loader surfaces at load time through the optional per-transform validator.

A family whose implementation needs torch (the traced-graph moves) is *declared* here by name,
validator and module (``declare``) and imported on its first call: loading skills, reading a
store or replaying a landscape then never pays torch's import (docs/architecture.md#imports).
"""

from __future__ import annotations

import ast
import copy
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

Transform = Callable[[str, dict], "str | None"]
ParamValidator = Callable[[dict], None]

MODEL_CLASS = "ModelNew"
# Functions of a KernelBench problem that produce the inputs: rewriting them would change what is
# measured, so no transform ever touches them.
INPUT_FUNCTIONS = frozenset({"get_inputs", "get_init_inputs"})

@dataclass(frozen=True)
class _Declared:
    """A transform known by name whose implementation module is imported on first use."""

    module: str


_REGISTRY: dict[str, Transform | _Declared] = {}
_VALIDATORS: dict[str, ParamValidator] = {}


def register(name: str, *, validate: ParamValidator | None = None) -> Callable[[Transform], Transform]:
    """Register a transform under ``name``; ``validate(params)`` (optional) raises ValueError.

    The validator exists so a skill with a broken template or an unknown mode fails when the skill
    is loaded, not halfway through a campaign. A declared name is taken by the implementation
    that registers it when its module is imported.
    """

    def decorator(fn: Transform) -> Transform:
        known = _REGISTRY.get(name)
        if known is not None and known is not fn and not isinstance(known, _Declared):
            raise ValueError(f"transform {name!r} is already registered")
        _REGISTRY[name] = fn
        if validate is not None:
            _VALIDATORS[name] = validate
        return fn

    return decorator


def declare(name: str, module: str, *, validate: ParamValidator | None = None) -> None:
    """Know transform ``name`` now, import ``module`` (which ``register``s it) on its first call.

    ``validate`` must not need the implementation's imports: skills are validated at load time,
    before anything is traced.
    """
    if name in _REGISTRY:
        raise ValueError(f"transform {name!r} is already registered")
    _REGISTRY[name] = _Declared(module)
    if validate is not None:
        _VALIDATORS[name] = validate


def get_transform(name: str) -> Transform:
    """Look up a transform; the KeyError lists the known names so a typo is obvious."""
    try:
        entry = _REGISTRY[name]
    except KeyError:
        raise KeyError(
            f"unknown transform {name!r}; known transforms: {', '.join(transform_names())}"
        ) from None
    if isinstance(entry, _Declared):
        importlib.import_module(entry.module)
        entry = _REGISTRY[name]
        if isinstance(entry, _Declared):
            raise RuntimeError(f"module {entry.module} does not register transform {name!r}")
    return entry


def transform_names() -> list[str]:
    return sorted(_REGISTRY)


def validate_params(name: str, params: dict) -> None:
    """Check ``params`` for transform ``name`` (KeyError if unknown, ValueError if invalid).

    Never imports a declared transform's implementation: only its validator runs.
    """
    if name not in _REGISTRY:
        get_transform(name)  # raises the KeyError that lists the known names
    validator = _VALIDATORS.get(name)
    if validator is not None:
        validator(params)


# ----------------------------------------------------------------------------- AST helpers


def parse(source: str) -> ast.Module | None:
    """Parse a candidate; ``None`` for unparseable text (a transform then does not apply)."""
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def render(tree: ast.Module) -> str:
    """Deterministic text of a tree (ast.unparse), with a trailing newline."""
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n"


def expr(text: str) -> ast.expr:
    """Parse one expression (used to build code fragments without string surgery on sources)."""
    return ast.parse(text, mode="eval").body


def stmt(text: str) -> ast.stmt:
    """Parse one statement."""
    return ast.parse(text).body[0]


def find_class(tree: ast.Module, name: str = MODEL_CLASS) -> ast.ClassDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def find_method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def compute_method(cls: ast.ClassDef) -> ast.FunctionDef | None:
    """The method holding the model's computation.

    After ``wrap_compile`` the public ``forward`` is a one-line trampoline and the real body lives
    in ``_forward_eager``; body-level transforms (in-place, channels_last) must edit the latter.
    """
    return find_method(cls, "_forward_eager") or find_method(cls, "forward")


def ensure_init(cls: ast.ClassDef) -> ast.FunctionDef:
    """Return ``__init__``, creating a pass-through one when the class relies on the inherited one."""
    init = find_method(cls, "__init__")
    if init is not None:
        return init
    init = stmt("def __init__(self, *args, **kwargs):\n    super().__init__(*args, **kwargs)")
    assert isinstance(init, ast.FunctionDef)
    index = 0
    while index < len(cls.body) and _is_docstring_or_assign(cls.body[index]):
        index += 1
    cls.body.insert(index, init)
    return init


def _is_docstring_or_assign(node: ast.stmt) -> bool:
    is_doc = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    return is_doc or isinstance(node, (ast.Assign, ast.AnnAssign))


def append_to_init(init: ast.FunctionDef, statement: ast.stmt) -> None:
    """Append at the end of ``__init__`` but before a trailing ``return``."""
    body = init.body
    index = len(body)
    if body and isinstance(body[-1], ast.Return):
        index -= 1
    body.insert(index, statement)


def scoped_functions(tree: ast.Module, scope: str) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Functions a rewrite may touch.

    ``modelnew``: the methods of ModelNew. ``module``: also helper classes and module-level
    functions (KernelBench level-3 problems keep activations in helper modules such as ``NewGELU``),
    but never ``get_inputs``/``get_init_inputs``.
    """
    if scope not in ("modelnew", "module"):
        raise ValueError(f"scope must be 'modelnew' or 'module', got {scope!r}")
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and (scope == "module" or node.name == MODEL_CLASS):
            for item in node.body:  # nested functions are covered by their enclosing method
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield item
        elif scope == "module" and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name not in INPUT_FUNCTIONS:
                yield node


def dotted(node: ast.AST) -> str | None:
    """``torch.nn.functional.relu`` -> "torch.nn.functional.relu"; None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def module_bindings(tree: ast.Module) -> set[str]:
    """Names bound at module level by imports, definitions or assignments."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name.split(".")[0]) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.update((a.asname or a.name) for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


# Imports a rewrite may add when its replacement refers to a module the candidate never imported.
_KNOWN_IMPORTS = {
    "torch": "import torch",
    "math": "import math",
    "F": "import torch.nn.functional as F",
    "nn": "import torch.nn as nn",
}


def ensure_imports(tree: ast.Module, roots: set[str]) -> None:
    """Add ``import`` lines for known module roots the replacement uses but the module lacks."""
    bound = module_bindings(tree)
    missing = sorted(r for r in roots if r in _KNOWN_IMPORTS and r not in bound)
    index = 0
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        index = 1  # keep the module docstring first
    while index < len(body) and isinstance(body[index], ast.ImportFrom) and body[index].module == "__future__":
        index += 1
    for root in missing:
        body.insert(index, stmt(_KNOWN_IMPORTS[root]))
        index += 1


def clone(node: ast.AST) -> ast.AST:
    return copy.deepcopy(node)


def same_tree(a: str, b: str) -> bool:
    """True when two sources have the same AST (formatting and comments ignored)."""
    ta, tb = parse(a), parse(b)
    if ta is None or tb is None:
        return a == b
    return ast.dump(ta) == ast.dump(tb)

"""Template knobs: ``const_set`` and ``const_step`` rewrite a module-level constant.

A *parametric* kernel keeps its tuning knobs as module-level constants (``BLOCK_M = 64``,
``METHOD = "fused"``) that the implementation reads at call time. Moving a knob is then a real,
measurable change of the implementation, and the move space of the problem is the product of the
knobs' declared values — which is what ``arbor record`` enumerates into a landscape, and what the
replay target serves back. The same two transforms edit the replay target's artifact (a module
holding only the knob assignments), so a replayed campaign applies exactly the moves a live one
would.

``knob_step`` is ``const_step`` for JSON-config artifacts (serving configs, replayed
landscapes), next to the serving transforms ``knob_set``/``knob_scale``/``knob_toggle``.

``const_*`` rewrite only a top-level ``NAME = <literal>`` with a single target; a name bound any other
way (a function, an import, a tuple unpacking) is not a knob and the move does not apply.
"""

from __future__ import annotations

import ast

from .base import parse, register, render
from .knobs import canonical_config, parse_config

Scalar = (bool, int, float, str)


def literal_value(node: ast.expr) -> object:
    """The value of a literal knob (``64``, ``-1``, ``0.5``, ``"fused"``, ``True``); ValueError otherwise."""
    value = ast.literal_eval(node)
    if value is not None and not isinstance(value, Scalar):
        raise ValueError("not a scalar literal")
    return value


def knob_assignment(tree: ast.Module, name: str) -> ast.Assign | None:
    """The single top-level ``name = <literal>`` assignment, or None when ``name`` is no knob."""
    found = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == name:
            if found is not None:
                return None  # assigned twice: which one wins depends on code we do not model
            found = node
    if found is None:
        return None
    try:
        literal_value(found.value)
    except (ValueError, SyntaxError, TypeError):
        return None
    return found


def knob_values(source: str, names: list[str] | None = None) -> dict[str, object]:
    """Every literal top-level knob of ``source`` (or only ``names``): the replay target's lookup key."""
    tree = parse(source)
    if tree is None:
        raise ValueError("source does not parse")
    out: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            key = node.targets[0].id
            if names is not None and key not in names:
                continue
            if knob_assignment(tree, key) is not None:
                out[key] = literal_value(node.value)
    return out


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def _set(source: str, name: str, value: object) -> str | None:
    tree = parse(source)
    if tree is None:
        return None
    node = knob_assignment(tree, name)
    if node is None or _same(literal_value(node.value), value):
        return None
    node.value = ast.parse(repr(value), mode="eval").body
    return render(tree)


def _check_name(params: dict) -> None:
    name = params.get("name")
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError("name must be the identifier of a module-level constant, e.g. BLOCK_M")


def _validate_set(params: dict) -> None:
    unknown = set(params) - {"name", "value"}
    if unknown:
        raise ValueError(f"unknown params {sorted(unknown)} (allowed: name, value)")
    _check_name(params)
    if "value" not in params or not isinstance(params["value"], Scalar):
        raise ValueError("value must be a number, a string or true/false")


def _validate_step(params: dict) -> None:
    unknown = set(params) - {"name", "values", "step"}
    if unknown:
        raise ValueError(f"unknown params {sorted(unknown)} (allowed: name, values, step)")
    _check_name(params)
    values = params.get("values")
    if not isinstance(values, list) or len(values) < 2 or not all(isinstance(v, Scalar) for v in values):
        raise ValueError("values must list at least two allowed values of the knob, in order")
    if len({repr(v) for v in values}) != len(values):
        raise ValueError("values must not repeat")
    step = params.get("step", 1)
    if not isinstance(step, int) or isinstance(step, bool) or step == 0:
        raise ValueError("step must be a non-zero whole number (+1: next value, -1: previous)")


@register("const_set", validate=_validate_set)
def const_set(source: str, params: dict) -> str | None:
    """Set knob ``name`` to ``value``. Not applicable when the knob is absent or already there."""
    return _set(source, params["name"], params["value"])


@register("const_step", validate=_validate_step)
def const_step(source: str, params: dict) -> str | None:
    """Move knob ``name`` ``step`` places along its ordered ``values`` (e.g. the next block size).

    Relative moves keep one move id meaningful at every node ("a larger tile"), so outcome priors
    learned below one parent (a regression halves the move) carry over to the others.
    Not applicable at the ends of the list or when the current value is not listed.
    """
    tree = parse(source)
    if tree is None:
        return None
    node = knob_assignment(tree, params["name"])
    if node is None:
        return None
    current = literal_value(node.value)
    values = params["values"]
    idx = next((i for i, v in enumerate(values) if _same(v, current)), None)
    if idx is None:
        return None
    new = idx + int(params.get("step", 1))
    if not 0 <= new < len(values):
        return None
    return _set(source, params["name"], values[new])


def _validate_knob_step(params: dict) -> None:
    renamed = {("name" if k == "knob" else k): v for k, v in params.items()}
    if "knob" not in params:
        raise ValueError("params need 'knob'")
    _validate_step(renamed)


@register("knob_step", validate=_validate_knob_step)
def knob_step(source: str, params: dict) -> str | None:
    """Move a JSON-config ``knob`` ``step`` places along its ordered ``values``."""
    cfg = parse_config(source)
    if cfg is None or params["knob"] not in cfg:
        return None
    values = params["values"]
    idx = next((i for i, v in enumerate(values) if _same(v, cfg[params["knob"]])), None)
    if idx is None:
        return None
    new = idx + int(params.get("step", 1))
    if not 0 <= new < len(values):
        return None
    cfg[params["knob"]] = values[new]
    return canonical_config(cfg)

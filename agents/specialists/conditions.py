"""``when:`` conditions of serving moves, e.g. ``kv_usage < 0.7 and queued > 0``.

Skill files are data, possibly written by someone else, so a condition is never handed to
``eval``: it is parsed with ``ast`` and only a whitelist of node types is accepted (boolean
logic, comparisons, arithmetic, names, numbers/strings/booleans, tuples/lists of those). Anything
else — calls, attributes, subscripts, lambdas, comprehensions — is rejected when the skill is
loaded, with the offending construct named.

Evaluation is three-valued (Kleene logic): a name the measurement does not report (a server
without a ``/metrics`` page has no ``kv_usage``) is *unknown*; ``unknown and False`` is False,
``unknown or True`` is True, and a condition that stays unknown lets the specialist decide (it
halves the move's prior rather than dropping the move).
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from typing import Any


class ConditionError(ValueError):
    """A ``when:`` text that is not a safe, well-formed condition."""


class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:
        return "unknown"


UNKNOWN = _Unknown()

_CMP = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
        ast.Eq: operator.eq, ast.NotEq: operator.ne,
        ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.Mod: operator.mod}
_ALLOWED = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd,
            ast.Compare, ast.BinOp, ast.Name, ast.Load, ast.Constant, ast.Tuple, ast.List,
            *_CMP, *_BIN)
MAX_LEN = 500


@dataclass(frozen=True)
class Condition:
    text: str
    tree: ast.Expression
    names: frozenset[str]

    def evaluate(self, env: dict[str, Any]) -> bool | None:
        """True / False, or None when it depends on a name ``env`` does not have."""
        try:
            v = _eval(self.tree.body, env)
        except (TypeError, ZeroDivisionError, ValueError, OverflowError):
            return None  # e.g. comparing a string knob with a number: cannot tell
        return None if v is UNKNOWN else bool(v)


def compile_condition(text: str) -> Condition:
    if not isinstance(text, str) or not text.strip():
        raise ConditionError("empty condition")
    if len(text) > MAX_LEN:
        raise ConditionError(f"condition longer than {MAX_LEN} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ConditionError(f"not an expression: {exc.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise ConditionError(f"{type(node).__name__} is not allowed (only comparisons, and/or/not, "
                                 "+ - * / %, names and literals)")
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, str, bool, type(None))):
            raise ConditionError(f"literal {node.value!r} is not allowed")
        if isinstance(node, ast.Name) and node.id.startswith("_"):
            raise ConditionError(f"name {node.id!r} is not allowed")
    names = frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name))
    return Condition(text.strip(), tree, names)


def _eval(node: ast.AST, env: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in ("true", "True"):
            return True
        if node.id in ("false", "False"):
            return False
        return env.get(node.id, UNKNOWN) if env.get(node.id) is not None else UNKNOWN
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_eval(e, env) for e in node.elts]
        return UNKNOWN if any(i is UNKNOWN for i in items) else tuple(items)
    if isinstance(node, ast.BoolOp):
        return _bool_op(node, env)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        if v is UNKNOWN:
            return UNKNOWN
        if isinstance(node.op, ast.Not):
            return not v
        return -v if isinstance(node.op, ast.USub) else +v
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, env), _eval(node.right, env)
        return UNKNOWN if UNKNOWN in (a, b) else _BIN[type(node.op)](a, b)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        result: Any = True
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, env)
            if left is UNKNOWN or right is UNKNOWN:
                result = UNKNOWN if result is not False else False
            elif not _CMP[type(op)](left, right):
                return False
            left = right
        return result
    raise ConditionError(f"{type(node).__name__} is not allowed")  # unreachable after compile


def _bool_op(node: ast.BoolOp, env: dict[str, Any]) -> Any:
    """Kleene logic: a decisive operand wins over an unknown one."""
    values = [_eval(v, env) for v in node.values]
    if isinstance(node.op, ast.And):
        if any(v is not UNKNOWN and not v for v in values):
            return False
        return UNKNOWN if any(v is UNKNOWN for v in values) else True
    if any(v is not UNKNOWN and v for v in values):
        return True
    return UNKNOWN if any(v is UNKNOWN for v in values) else False

"""A plan's value expressions in C++: the op table's math, spelled for the CPU kernel.

The op table (``triton/ops.py``) writes each value as an expression over the documented
``triton.language`` functions; that text is Python syntax, so it is parsed here and printed as
C++ over the math of ``math.MATH`` (float32 throughout: literals get an ``f``, so nothing is
promoted to double inside a vectorised loop). Anything outside the table's vocabulary raises
``Unsupported``: the move is then not offered, never approximated.
"""

from __future__ import annotations

import ast
import math

from ..triton.plan import Unsupported

# tl function -> C++ (a format string over the translated arguments)
FUNCTIONS = {
    "exp": "arbor_exp({0})", "log": "arbor_log({0})", "sigmoid": "arbor_sigmoid({0})",
    "erf": "arbor_erf({0})", "sqrt": "std::sqrt({0})", "rsqrt": "(1.0f / std::sqrt({0}))",
    "abs": "std::fabs({0})", "sin": "std::sin({0})", "cos": "std::cos({0})",
    "maximum": "arbor_max({0}, {1})", "minimum": "arbor_min({0}, {1})", "where": "(({0}) ? ({1}) : ({2}))",
}
_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_COMPARE = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!="}
_SPECIAL = {"inf": "INFINITY", "-inf": "(-INFINITY)", "nan": "NAN"}


def literal(value: float) -> str:
    """A float32 literal (infinities and NaN by name)."""
    value = float(value)
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "(-INFINITY)"
    return f"{value!r}f"


def translate(code: str, invariant: frozenset[str] = frozenset()) -> str:
    """``code`` (a Triton expression from a plan) as a C++ float expression. A division by a name in
    ``invariant`` (a value computed outside the element loop: softmax's row sum) is written as a
    multiply by its reciprocal, which the compiler hoists out of the loop: one division a row
    instead of a vector division every 8 elements (within 1 ulp of the quotient: 2 roundings)."""
    try:
        tree = ast.parse(code, mode="eval").body
    except SyntaxError as exc:
        raise Unsupported(f"an expression the C++ kernel cannot read: {code!r}") from exc
    return _expr(tree, invariant)


def _expr(node: ast.AST, invariant: frozenset[str] = frozenset()) -> str:  # noqa: C901 - one case per node type
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return literal(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return f"(-{_expr(node.operand, invariant)})"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd):
        return _expr(node.operand, invariant)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Name) \
            and node.right.id in invariant:
        return f"({_expr(node.left, invariant)} * (1.0f / {node.right.id}))"
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return f"({_expr(node.left, invariant)} {_BINARY[type(node.op)]} {_expr(node.right, invariant)})"
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        return f"({_expr(node.left, invariant)} {_COMPARE[type(node.ops[0])]} {_expr(node.comparators[0], invariant)})"
    if isinstance(node, ast.Call) and not node.keywords:
        f = node.func
        if isinstance(f, ast.Name) and f.id == "float" and len(node.args) == 1 \
                and isinstance(node.args[0], ast.Constant) and str(node.args[0].value) in _SPECIAL:
            return _SPECIAL[str(node.args[0].value)]
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "tl" \
                and f.attr in FUNCTIONS:
            args = [_expr(a, invariant) for a in node.args]
            template = FUNCTIONS[f.attr]
            if template.count("{") != len(args):
                raise Unsupported(f"tl.{f.attr} with {len(args)} arguments")
            return template.format(*args)
    raise Unsupported(f"an expression the C++ kernel does not model: {ast.unparse(node)!r}")

"""Expression-template rewrites: ``rewrite_pattern`` and ``strength_reduce_pow``.

Templates are Python expressions in which ``$name`` is a wildcard. Matching is done on the AST,
never on text, so formatting, parentheses and comments in the candidate do not matter, and a
replacement is inserted as a subtree so operator precedence is always right. A wildcard that
appears twice must match structurally equal subtrees both times: ``$x * torch.sigmoid($x)`` is
SiLU only when both operands are the same expression. The only text step is turning ``$x`` into
a reserved identifier in the *template* before parsing it.
"""

from __future__ import annotations

import ast
import copy
import math
import re
from dataclasses import dataclass
from functools import lru_cache

from .base import dotted, ensure_imports, expr, parse, register, render, scoped_functions

_WILD_PREFIX = "__arbor_wild_"
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
# a + b == b + a and a * b == b * a hold exactly in IEEE arithmetic (associativity does not), so
# trying swapped operands never changes a result for numbers and tensors.
_COMMUTATIVE = (ast.Add, ast.Mult)
_IGNORED_FIELDS = {"ctx", "kind", "type_comment"}


@dataclass(frozen=True)
class Template:
    """A parsed pattern/replacement pair."""

    pattern: ast.expr
    replacement: ast.expr
    wildcards: frozenset[str]


def _template_expr(text: str, what: str) -> ast.expr:
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{what} must be a non-empty Python expression")
    try:
        return expr(_DOLLAR.sub(lambda m: _WILD_PREFIX + m.group(1), text.strip()))
    except SyntaxError as err:
        raise ValueError(f"{what} is not a Python expression: {text!r} ({err.msg})") from None


def _wildcards(node: ast.AST) -> set[str]:
    return {
        n.id[len(_WILD_PREFIX):]
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and n.id.startswith(_WILD_PREFIX)
    }


@lru_cache(maxsize=256)
def compile_template(pattern: str, replacement: str) -> Template:
    """Parse and check a template (cached: skills reuse the same few templates constantly)."""
    pat = _template_expr(pattern, "pattern")
    rep = _template_expr(replacement, "replacement")
    if isinstance(pat, ast.Name) and pat.id.startswith(_WILD_PREFIX):
        raise ValueError("pattern must not be a bare wildcard (it would match every expression)")
    unbound = _wildcards(rep) - _wildcards(pat)
    if unbound:
        names = ", ".join("$" + n for n in sorted(unbound))
        raise ValueError(f"replacement uses wildcards absent from the pattern: {names}")
    return Template(pat, rep, frozenset(_wildcards(pat)))


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float, complex)) and not isinstance(value, bool)


# Literals match by value, not by spelling: reference code writes sqrt(2/pi) as 0.7978845608,
# 0.7978845608028654 or math.sqrt(2.0 / math.pi). A relative 1e-6 is far below what any of these
# moves' tolerances notice, and far above the rounding of a literal shortened to 10 digits.
REL_TOL = 1e-6


def _const_equal(a: object, b: object) -> bool:
    if _is_number(a) and _is_number(b):
        if a == b:  # 1 == 1.0: templates need not guess how the author spelled a constant
            return True
        return abs(a - b) <= REL_TOL * max(abs(a), abs(b))  # type: ignore[operator]
    return type(a) is type(b) and a == b


_MATH_CONSTS = {"math.pi", "math.e", "math.tau", "torch.pi", "np.pi", "numpy.pi"}
_MATH_FUNCS = {"math.sqrt", "math.exp", "math.log", "math.tanh", "np.sqrt", "numpy.sqrt"}
_ARITH = {ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y, ast.Mult: lambda x, y: x * y,
          ast.Div: lambda x, y: x / y, ast.Pow: lambda x, y: x ** y}


def numeric_value(node: object) -> float | None:
    """The value of a constant expression (literals, math.pi, math.sqrt(...), + - * / **), else None."""
    import math

    try:
        if isinstance(node, ast.Constant) and _is_number(node.value) and not isinstance(node.value, complex):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = numeric_value(node.operand)
            return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            a, b = numeric_value(node.left), numeric_value(node.right)
            return None if a is None or b is None else float(_ARITH[type(node.op)](a, b))
        if isinstance(node, ast.Attribute) and dotted(node) in _MATH_CONSTS:
            return {"pi": math.pi, "e": math.e, "tau": math.tau}[node.attr]
        if (isinstance(node, ast.Call) and dotted(node.func) in _MATH_FUNCS and len(node.args) == 1
                and not node.keywords):
            v = numeric_value(node.args[0])
            return None if v is None else float(getattr(math, node.func.attr)(v))  # type: ignore[attr-defined]
    except (ArithmeticError, ValueError, TypeError):
        return None
    return None


def _fields(node: ast.AST) -> list[tuple[str, object]]:
    out = []
    for name, value in ast.iter_fields(node):
        if name in _IGNORED_FIELDS:
            continue
        if name == "keywords":  # keyword order is irrelevant to the call
            value = sorted(value, key=lambda k: (k.arg is None, k.arg or ""))
        out.append((name, value))
    return out


def equal(a: object, b: object) -> bool:
    """Structural equality of two subtrees (constants by value, contexts ignored)."""
    return match(a, b, {}, commutative=False) is not None


def match(pat: object, node: object, binds: dict[str, ast.AST], *, commutative: bool = True) -> dict | None:
    """Match ``node`` against ``pat``; returns the extended bindings or None."""
    if isinstance(pat, ast.Name) and pat.id.startswith(_WILD_PREFIX):
        if not isinstance(node, ast.expr):
            return None
        key = pat.id[len(_WILD_PREFIX):]
        if key in binds:
            return binds if equal(binds[key], node) else None
        return {**binds, key: node}
    if isinstance(pat, list):
        if not isinstance(node, list) or len(pat) != len(node):
            return None
        for p, n in zip(pat, node):
            binds = match(p, n, binds, commutative=commutative)
            if binds is None:
                return None
        return binds
    if not isinstance(pat, ast.AST):
        return binds if pat == node else None
    if isinstance(pat, ast.expr) and not isinstance(pat, ast.Name):
        pv = numeric_value(pat)
        if pv is not None:  # a constant in the template matches any spelling of its value
            nv = numeric_value(node)
            return binds if nv is not None and _const_equal(pv, nv) else None
    if type(pat) is not type(node):
        return None
    if isinstance(pat, ast.Constant):
        return binds if _const_equal(pat.value, node.value) else None  # type: ignore[attr-defined]
    if commutative and isinstance(pat, ast.BinOp) and isinstance(pat.op, _COMMUTATIVE):
        assert isinstance(node, ast.BinOp)
        if type(pat.op) is type(node.op):
            for left, right in ((node.left, node.right), (node.right, node.left)):
                got = match(pat.left, left, binds, commutative=commutative)
                if got is not None:
                    got = match(pat.right, right, got, commutative=commutative)
                if got is not None:
                    return got
        return None
    for (pname, pval), (nname, nval) in zip(_fields(pat), _fields(node)):
        if pname != nname:
            return None
        binds = match(pval, nval, binds, commutative=commutative)
        if binds is None:
            return None
    return binds


class _Substitute(ast.NodeTransformer):
    def __init__(self, binds: dict[str, ast.AST]) -> None:
        self.binds = binds

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id.startswith(_WILD_PREFIX):
            return copy.deepcopy(self.binds[node.id[len(_WILD_PREFIX):]])
        return node


def instantiate(template: ast.expr, binds: dict[str, ast.AST]) -> ast.expr:
    result = _Substitute(binds).visit(copy.deepcopy(template))
    assert isinstance(result, ast.expr)
    return result


class _Rewriter(ast.NodeTransformer):
    """Bottom-up rewrite so nested matches (e.g. SiLU of a SiLU) are all replaced."""

    def __init__(self, template: Template, commutative: bool) -> None:
        self.template = template
        self.commutative = commutative
        self.count = 0

    def generic_visit(self, node: ast.AST) -> ast.AST:
        node = super().generic_visit(node)
        if isinstance(node, ast.expr):
            binds = match(self.template.pattern, node, {}, commutative=self.commutative)
            if binds is not None:
                self.count += 1
                new = instantiate(self.template.replacement, binds)
                return ast.copy_location(new, node)
        return node


def _root_names(node: ast.AST) -> set[str]:
    roots = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute):
            name = dotted(n)
            if name:
                roots.add(name.split(".")[0])
    return {r for r in roots if not r.startswith(_WILD_PREFIX)}


def _validate_rewrite(params: dict) -> None:
    unknown = set(params) - {"pattern", "replacement", "scope", "commutative"}
    if unknown:
        raise ValueError(f"unknown params {sorted(unknown)} (allowed: pattern, replacement, scope, commutative)")
    compile_template(params.get("pattern", ""), params.get("replacement", ""))
    if params.get("scope", "modelnew") not in ("modelnew", "module"):
        raise ValueError("scope must be 'modelnew' or 'module'")


@register("rewrite_pattern", validate=_validate_rewrite)
def rewrite_pattern(source: str, params: dict) -> str | None:
    """Replace every match of ``params["pattern"]`` by ``params["replacement"]``.

    Params: ``pattern``, ``replacement`` (templates with ``$x`` wildcards); ``scope``
    ("modelnew": ModelNew's methods, the default; "module": also helper classes and functions,
    never get_inputs/get_init_inputs); ``commutative`` (default true: ``a + b`` also matches
    ``b + a``, same for ``*``).

    Safe when the replacement computes the same function as the pattern for the operand types
    involved (tensors); numerically it may differ within floating-point tolerance (a fused GELU
    rounds differently from the manual formula). Commutative matching assumes numeric or tensor
    operands (``+`` on lists is not commutative). Imports needed by the replacement (torch, math,
    F, nn) are added when missing.
    """
    _validate_rewrite(params)
    template = compile_template(params["pattern"], params["replacement"])
    tree = parse(source)
    if tree is None:
        return None
    rewriter = _Rewriter(template, bool(params.get("commutative", True)))
    for fn in list(scoped_functions(tree, params.get("scope", "modelnew"))):
        fn.body = [rewriter.visit(s) for s in fn.body]
    if rewriter.count == 0:
        return None
    ensure_imports(tree, _root_names(template.replacement))
    return render(tree)


# ----------------------------------------------------------------------------- pow


def _int_exponent(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and _is_number(node.value) and not isinstance(node.value, complex):
        if float(node.value).is_integer():
            return int(node.value)
    return None


def _is_half(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and _is_number(node.value) and node.value == 0.5


def _product(name: ast.Name, n: int) -> ast.expr:
    out: ast.expr = ast.Name(id=name.id, ctx=ast.Load())
    for _ in range(n - 1):
        out = ast.BinOp(left=out, op=ast.Mult(), right=ast.Name(id=name.id, ctx=ast.Load()))
    return out


class _PowReducer(ast.NodeTransformer):
    def __init__(self, max_exponent: int) -> None:
        self.max_exponent = max_exponent
        self.count = 0

    def _reduce(self, base: ast.expr, exponent: ast.expr, tensor_known: bool, method: bool) -> ast.expr | None:
        n = _int_exponent(exponent)
        if n is not None and 2 <= n <= self.max_exponent and isinstance(base, ast.Name):
            return _product(base, n)
        if _is_half(exponent) and tensor_known:
            if method:
                return ast.Call(ast.Attribute(base, "sqrt", ast.Load()), [], [])
            return ast.Call(expr("torch.sqrt"), [base], [])
        return None

    def generic_visit(self, node: ast.AST) -> ast.AST:
        node = super().generic_visit(node)
        new = None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            # x ** 0.5 is left alone: x may be a Python float, where torch.sqrt would fail.
            new = self._reduce(node.left, node.right, tensor_known=False, method=False)
        elif isinstance(node, ast.Call) and not node.keywords and len(node.args) == 2:
            if dotted(node.func) == "torch.pow":
                new = self._reduce(node.args[0], node.args[1], tensor_known=True, method=False)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "pow"
            and dotted(node.func) != "torch.pow"
            and dotted(node.func) != "math.pow"
            and len(node.args) == 1
            and not node.keywords
        ):
            new = self._reduce(node.func.value, node.args[0], tensor_known=True, method=True)
        if new is None:
            return node
        self.count += 1
        return ast.copy_location(new, node)


def _validate_pow(params: dict) -> None:
    unknown = set(params) - {"max_exponent", "scope"}
    if unknown:
        raise ValueError(f"unknown params {sorted(unknown)} (allowed: max_exponent, scope)")
    max_exp = params.get("max_exponent", 3)
    if not isinstance(max_exp, int) or isinstance(max_exp, bool) or not 2 <= max_exp <= 8:
        raise ValueError("max_exponent must be an integer between 2 and 8")


@register("strength_reduce_pow", validate=_validate_pow)
def strength_reduce_pow(source: str, params: dict) -> str | None:
    """``torch.pow(x, 2)``, ``x ** 3``, ``x.pow(2)`` -> ``x * x [* x]``; ``torch.pow(x, 0.5)`` -> sqrt.

    Params: ``max_exponent`` (default 3), ``scope`` as for rewrite_pattern.

    Safe because the base is duplicated only when it is a plain name (evaluating it twice has no
    side effect and costs nothing), and ``sqrt`` replaces ``pow(., 0.5)`` only where the base is
    certainly a tensor (``torch.pow``/``.pow``). Results may differ in the last ulp from ``pow``.
    """
    _validate_pow(params)
    tree = parse(source)
    if tree is None:
        return None
    reducer = _PowReducer(int(params.get("max_exponent", 3)))
    for fn in list(scoped_functions(tree, params.get("scope", "modelnew"))):
        fn.body = [reducer.visit(s) for s in fn.body]
    if reducer.count == 0:
        return None
    ensure_imports(tree, {"torch"})
    return render(tree)

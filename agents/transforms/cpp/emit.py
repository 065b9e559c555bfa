"""What every mode of the generated C++ kernel writes with (``source.py`` for the flat and row
modes, ``column.py``): the indented writer, operand loads and the plan's values in program order."""

from __future__ import annotations

from ..triton.plan import Plan, Value
from ..triton.region import Match
from ..triton.source import index_parts, outside
from .expr import translate

_NEUTRAL = {"sum": "0.0f", "max": "(-INFINITY)", "min": "INFINITY"}
_COMBINE = {"sum": "{acc} += {x};", "max": "{acc} = ({x} > {acc}) ? {x} : {acc};",
            "min": "{acc} = ({x} < {acc}) ? {x} : {acc};"}
_CLAUSE = {"sum": "+", "max": "max", "min": "min"}



class _Writer:
    def __init__(self, depth: int = 1) -> None:
        self.lines: list[str] = []
        self.depth = depth

    def __call__(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def open(self, header: str) -> None:
        self(header + " {")
        self.depth += 1

    def close(self, tail: str = "}") -> None:
        self.depth -= 1
        self(tail)


def _load(m: Match, v: Value) -> str:
    o = m.plan.operands[v.operand]
    ptr = f"p{o.index}"
    if o.level == "const":
        return f"{ptr}[0]"
    div, span = index_parts(m, o)
    if per_column(m, o):
        return f"{ptr}[c % {span}]" if span else f"{ptr}[c]"
    if m.mode == "flat" and o.level == "full" and (div or span) and split(m) is not None:
        return f"{ptr}[q{o.index}]" if o.hi < m.plan.ndim else f"{ptr}[q{o.index} + j]"
    idx = "flat" if o.level == "full" else "rflat"
    if div:
        idx = f"({idx} / {div})"
    if span:
        idx = f"({idx} % {span})"
    return f"{ptr}[{idx}]"


def per_column(m: Match, o) -> bool:  # type: ignore[no-untyped-def]
    """Whether row mode reads operand ``o`` at the row's position ``c`` (a weight over the
    reduced dims), not at the element's ``flat``."""
    return m.mode == "row" and o.level == "full" and o.lo >= m.plan.reduce_lo and o.hi == m.plan.ndim


def plain_operands(m: Match) -> list:
    """The operands read along the whole domain without a division or a modulo in their index:
    the ones a prefetch can follow."""
    return [o for o in m.plan.operands if o.level == "full" and not any(index_parts(m, o))]


def _emit_value(w: _Writer, m: Match, v: Value) -> None:
    if v.operand is not None:
        w(f"const float {v.name} = {_load(m, v)};")
    elif v.reduce is None:
        outer = frozenset(d for d in v.deps if m.plan.level_of(d) != "full") if v.level == "full" else frozenset()
        w(f"const float {v.name} = {translate(v.code, outer)};")


def _emit_outside(w: _Writer, m: Match, done: set[str]) -> None:
    while True:
        ready = outside(m.plan, done)
        if not ready:
            return
        for v in ready:
            _emit_value(w, m, v)


def _emit_chain(w: _Writer, m: Match, roots: list[str], kept: str | None = None) -> None:
    """The full values ``roots`` need, in program order; ``kept`` is read back from the output,
    and what only it needed is not computed."""
    plan = m.plan
    for name in plan.full_chain(roots):
        if name == kept:
            w(f"const float {name} = o[flat];")
        elif kept is None or _needed_without(plan, roots, kept, name):
            _emit_value(w, m, plan.value(name))


def _needed_without(plan: Plan, roots: list[str], kept: str, name: str) -> bool:
    """Whether ``name`` is needed by ``roots`` through a path that does not pass ``kept``."""
    stack, seen = [r for r in roots if r != kept], set()
    while stack:
        n = stack.pop()
        if n == name:
            return True
        if n in seen or n == kept or plan.level_of(n) != "full":
            continue
        seen.add(n)
        stack.extend(plan.value(n).deps)
    return False


def split(m: Match) -> int | None:
    """For ``flat`` mode, the dim ``k`` that splits the domain into an outer loop and an inner one
    over ``shape[k:]`` in which every operand's index is affine (``q + j``, or ``q``, with ``q``
    computed once per outer step): a bias of shape ``(C,)`` read as ``flat % C`` is an integer
    division per element, which no vector unit does. The inner dims must lie inside each
    broadcast operand's own trailing dims (``k >= lo``) or after them (``k >= hi``); the smallest
    such ``k`` gives the longest inner loop. None when no operand broadcasts (one plain loop)."""
    plan = m.plan
    partial = [o for o in plan.operands if o.level == "full" and (o.lo > 0 or o.hi < plan.ndim)]
    if not partial:
        return None
    return max(o.lo if o.hi == plan.ndim else o.hi for o in partial)

"""What a generated Triton kernel computes: a small SSA program over one row of a traced region.

Pattern matching (``region.py``) lowers the torch.fx nodes of a fusable region into this program;
source emission (``source.py``) turns it into a ``@triton.jit`` kernel. Between the two, nothing
refers to torch.fx, so the emitter can be tested on plans alone and the matcher on graphs alone.

Every value has a *level*:

- ``full``: one value per element of the region's domain ``S`` (a Triton block of lanes);
- ``row``: one value per row, i.e. constant along the reduced dims (a reduction's result, or an
  operand that is size 1 along them);
- ``const``: a literal, or a value computed from literals and scalar operands only.

Elementwise ops take the highest level of their arguments; a reduction takes a ``full`` value to a
``row`` value. Everything is computed in float32, whatever the tensors' dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

LEVELS = ("const", "row", "full")
REDUCE_KINDS = ("sum", "max", "min")


class Unsupported(Exception):
    """The region cannot be expressed as a generated kernel (the move is then not offered)."""


@dataclass(frozen=True)
class Operand:
    """A tensor the kernel reads: the k-th input pointer.

    ``lo:hi`` are the dims of ``S`` along which the (contiguous) operand varies; it is size 1 (or
    absent, for leading dims) along all others. ``level`` follows from them and the reduced dims.
    """

    index: int
    level: str
    lo: int
    hi: int


@dataclass
class Value:
    name: str
    level: str
    code: str = ""  # a Triton expression over other values' names (not for loads and reductions)
    deps: tuple[str, ...] = ()
    reduce: str | None = None  # sum | max | min: ``deps[0]`` reduced over the row
    operand: int | None = None  # a load of operand ``operand``
    keep: bool = True  # row values: True when their tensor keeps the reduced dims (keepdim)


@dataclass
class Plan:
    """One kernel: the domain, its reduced dims, the operands, the program and its output."""

    ndim: int
    reduce_lo: int | None = None  # reduced dims [reduce_lo, reduce_hi) of S; None: no reduction
    reduce_hi: int | None = None
    operands: list[Operand] = field(default_factory=list)
    values: list[Value] = field(default_factory=list)
    output: str = ""
    runtime_args: dict[str, str] = field(default_factory=dict)  # kernel arg -> launcher expression
    _by_name: dict[str, Value] = field(default_factory=dict, repr=False)

    # --- building -------------------------------------------------------------------------
    def value(self, name: str) -> Value:
        return self._by_name[name]

    def has(self, name: str) -> bool:
        return name in self._by_name

    def _add(self, value: Value) -> str:
        self.values.append(value)
        self._by_name[value.name] = value
        return value.name

    def load(self, operand: Operand) -> str:
        name = f"x{operand.index}"
        if name not in self._by_name:
            self._add(Value(name, operand.level, operand=operand.index))
        return name

    def level_of(self, arg: str) -> str:
        return self._by_name[arg].level if arg in self._by_name else "const"

    def op(self, template: str, *args: str) -> str:
        """An elementwise value: ``template`` formatted with ``args`` (value names or literals)."""
        values = [self._by_name[a] for a in args if a in self._by_name]
        level = max((v.level for v in values), key=LEVELS.index, default="const")
        rows = {v.keep for v in values if v.level == "row"}
        if level == "full" and False in rows:
            raise Unsupported("a reduction without keepdim broadcast against the full tensor")
        if len(rows) > 1:
            raise Unsupported("row values with and without the reduced dims combined")
        name = f"v{len(self.values)}"
        return self._add(Value(name, level, template.format(*args), tuple(v.name for v in values),
                               keep=rows.pop() if rows else True))

    def reduce(self, kind: str, arg: str, keep: bool) -> str:
        if kind not in REDUCE_KINDS:
            raise Unsupported(f"reduction {kind}")
        if self.level_of(arg) != "full":
            raise Unsupported("a reduction of a value that is already constant along the row")
        name = f"r{len(self.values)}"
        return self._add(Value(name, "row", deps=(arg,), reduce=kind, keep=keep))

    def row_view(self, arg: str, keep: bool) -> str:
        """``arg`` (a row value) as a tensor that keeps (True) or drops the reduced dims."""
        v = self._by_name[arg]
        if v.level != "row" or v.keep == keep:
            return arg
        return self._add(Value(f"v{len(self.values)}", "row", arg, (arg,), keep=keep))

    def runtime(self, name: str, expression: str) -> str:
        """A scalar the launcher computes at run time (``R``, an eps that depends on the dtype)."""
        self.runtime_args[name] = expression
        return name

    # --- reading --------------------------------------------------------------------------
    @property
    def reductions(self) -> list[Value]:
        return [v for v in self.values if v.reduce]

    def depth(self) -> dict[str, int]:
        """For each value, how many reductions must finish before it can be computed."""
        out: dict[str, int] = {}
        for v in self.values:
            d = max((out[a] for a in v.deps), default=0)
            out[v.name] = d + 1 if v.reduce else d
        return out

    def full_chain(self, roots: list[str]) -> list[str]:
        """The full-level values ``roots`` need, in program order: what one pass over the row must
        compute per element (row and const values are computed once, outside the pass)."""
        seen: set[str] = set()
        stack = [r for r in roots if self.level_of(r) == "full"]
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            stack.extend(d for d in self._by_name[n].deps if self.level_of(d) == "full")
        return [v.name for v in self.values if v.name in seen]

def literal(value: float) -> str:
    """A float as Triton source (``float('inf')`` for infinities: valid in @triton.jit code)."""
    value = float(value)
    if math.isnan(value):
        return "float('nan')"
    if math.isinf(value):
        return "float('inf')" if value > 0 else "float('-inf')"
    return repr(value)

"""Kernel source from a matched region: one ``@triton.jit`` kernel and the function launching it.

The generated code follows the documented Triton programming model only (``tl.program_id``,
``tl.arange``, masked ``tl.load``/``tl.store`` with ``other``, ``tl.sum``/``tl.max``/``tl.min``,
``constexpr`` block sizes, ``num_warps`` at launch), so one source runs on a GPU and, unchanged,
under ``TRITON_INTERPRET=1`` on the CPU, where CI checks it against the reference.

- ``flat``: one program per ``BLOCK`` elements, int64 offsets, a masked tail.
- ``row``: one program per row. A row that fits in ``BLOCK`` lanes (``SINGLE``, decided by the
  launcher at run time) is loaded once and every pass works on registers; a longer row is walked in
  ``BLOCK``-wide column blocks, once per group of independent reductions (softmax: max, then sum;
  layer norm: mean, then the centred variance) and once more to store. Accumulators are float32
  per lane, masked lanes are neutral (0, -inf, +inf), and are reduced across lanes at the end.
- ``column``: one program per ``BLOCK`` positions of the trailing dims; each loops over the reduced
  dims one index at a time, so each load is ``BLOCK`` consecutive elements (coalesced) and the
  reduction needs no cross-lane step.

Sizes are kernel arguments read from the tensors at run time: nothing in the source depends on
the problem's sizes, only on its structure.
"""

from __future__ import annotations

from .plan import Plan, Value
from .region import Match

KERNEL = "_arbor_fused_kernel"
LAUNCHER = "_arbor_fused"
_NEUTRAL = {"sum": "0.0", "max": "float('-inf')", "min": "float('inf')"}
_COMBINE = {"sum": "{acc} + {x}", "max": "tl.maximum({acc}, {x})", "min": "tl.minimum({acc}, {x})"}
_FINISH = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min"}


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1

    def __call__(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def block(self, header: str) -> "_Block":
        return _Block(self, header)


class _Block:
    def __init__(self, w: _Writer, header: str) -> None:
        self.w, self.header = w, header

    def __enter__(self) -> None:
        self.w(self.header)
        self.w.depth += 1

    def __exit__(self, *exc: object) -> None:
        self.w.depth -= 1


def _operand_args(m: Match) -> list[str]:
    """Per-operand size arguments (the divisor and span of its flat index), where needed."""
    out = []
    for o in m.plan.operands:
        div, span = index_parts(m, o)
        out += [a for a in (div, span) if a]
    return out


def index_parts(m: Match, o) -> tuple[str | None, str | None]:  # type: ignore[no-untyped-def]
    if o.level == "const":
        return None, None
    ndim = m.plan.ndim
    if m.mode == "row" and o.level == "full" and o.lo >= m.plan.reduce_lo and o.hi == ndim:
        return None, (f"in{o.index}_span" if o.lo > m.plan.reduce_lo else None)
    div = f"in{o.index}_div" if o.hi < ndim else None
    span = f"in{o.index}_span" if o.lo > 0 else None
    return div, span


def _load(m: Match, v: Value, masked: bool) -> str:
    o = m.plan.operands[v.operand]
    ptr = f"in{o.index}_ptr"
    if o.level == "const":
        return f"tl.load({ptr}).to(tl.float32)"
    div, span = index_parts(m, o)
    if m.mode == "row" and o.level == "full" and o.lo >= m.plan.reduce_lo and o.hi == m.plan.ndim:
        idx = f"cols % {span}" if span else "cols"
    else:
        idx = "flat" if o.level == "full" else "rflat"
        if div:
            idx = f"({idx} // {div})"
        if span:
            idx = f"({idx} % {span})"
    mask = ", mask=mask, other=0.0" if masked else ""
    return f"tl.load({ptr} + {idx}{mask}).to(tl.float32)"


def _emit_value(w: _Writer, m: Match, v: Value, masked: bool) -> None:
    if v.operand is not None:
        w(f"{v.name} = {_load(m, v, masked)}")
    elif v.reduce is None:
        w(f"{v.name} = {v.code}")


def _store(m: Match, value: str, where: str, masked: bool) -> str:
    mask = ", mask=mask" if masked else ""
    return f"tl.store(out_ptr + {where}, {value}.to(out_ptr.dtype.element_ty){mask})"


def outside(plan: Plan, done: set[str]) -> list[Value]:
    """Row/const values whose inputs are all available, not yet emitted."""
    ready = []
    for v in plan.values:
        if v.name in done or v.level == "full" or v.reduce:
            continue
        if all(d in done for d in v.deps):
            ready.append(v)
            done.add(v.name)
    return ready


def groups(plan: Plan) -> list[list[Value]]:
    """Reductions grouped by how many reductions precede them: each group is one pass."""
    depth = plan.depth()
    by: dict[int, list[Value]] = {}
    for r in plan.reductions:
        by.setdefault(depth[r.name], []).append(r)
    return [by[d] for d in sorted(by)]


def _emit_outside(w: _Writer, m: Match, done: set[str], masked: bool) -> None:
    while True:
        ready = outside(m.plan, done)
        if not ready:
            return
        for v in ready:
            _emit_value(w, m, v, masked)


def _emit_chain(w: _Writer, m: Match, roots: list[str], masked: bool) -> None:
    plan = m.plan
    for name in plan.full_chain(roots):
        _emit_value(w, m, plan.value(name), masked)


# ----------------------------------------------------------------------------- modes

def _flat(w: _Writer, m: Match) -> None:
    w("pid = tl.program_id(0).to(tl.int64)")
    w("flat = pid * BLOCK + tl.arange(0, BLOCK)")
    w("mask = flat < N")
    done: set[str] = set()
    _emit_outside(w, m, done, False)
    _emit_chain(w, m, [m.plan.output], True)
    w(_store(m, m.plan.output, "flat", True))


def _row_single(w: _Writer, m: Match, done: set[str]) -> None:
    plan = m.plan
    w("cols = tl.arange(0, BLOCK)")
    w("mask = cols < R")
    w("flat = rflat + cols")
    for v in plan.values:
        if v.name in done:
            continue
        if v.reduce:
            x = v.deps[0]
            w(f"{v.name} = {_FINISH[v.reduce]}(tl.where(mask, {x}, {_NEUTRAL[v.reduce]}), axis=0)")
        else:
            _emit_value(w, m, v, v.level == "full")
    out = plan.value(plan.output)
    w(_store(m, plan.output, "flat" if out.level == "full" else "row", out.level == "full"))


def _row_looped(w: _Writer, m: Match, done: set[str]) -> None:
    plan = m.plan
    for group in groups(plan):
        for r in group:
            w(f"acc_{r.name} = tl.full([BLOCK], {_NEUTRAL[r.reduce]}, tl.float32)")
        with w.block("for start in range(0, R, BLOCK):"):
            w("cols = start + tl.arange(0, BLOCK)")
            w("mask = cols < R")
            w("flat = rflat + cols")
            _emit_chain(w, m, [r.deps[0] for r in group], True)
            for r in group:
                x = f"tl.where(mask, {r.deps[0]}, {_NEUTRAL[r.reduce]})"
                w(f"acc_{r.name} = " + _COMBINE[r.reduce].format(acc=f"acc_{r.name}", x=x))
        for r in group:
            w(f"{r.name} = {_FINISH[r.reduce]}(acc_{r.name}, axis=0)")
            done.add(r.name)
        _emit_outside(w, m, done, False)
    out = plan.value(plan.output)
    if out.level == "full":
        with w.block("for start in range(0, R, BLOCK):"):
            w("cols = start + tl.arange(0, BLOCK)")
            w("mask = cols < R")
            w("flat = rflat + cols")
            _emit_chain(w, m, [plan.output], True)
            w(_store(m, plan.output, "flat", True))
    else:
        w(_store(m, plan.output, "row", False))


def _row(w: _Writer, m: Match) -> None:
    w("row = tl.program_id(0).to(tl.int64)")
    w("rflat = row * R")
    done: set[str] = set()
    _emit_outside(w, m, done, False)
    with w.block("if SINGLE:"):
        _row_single(w, m, set(done))
    with w.block("else:"):
        _row_looped(w, m, set(done))


def _column(w: _Writer, m: Match) -> None:
    plan = m.plan
    w("pid = tl.program_id(0)")
    w("outer = (pid // NBLK).to(tl.int64)")
    w("lanes = (pid % NBLK) * BLOCK + tl.arange(0, BLOCK)")
    w("mask = lanes < INNER")
    w("rflat = outer * R * INNER + lanes")
    done: set[str] = set()
    _emit_outside(w, m, done, True)
    for group in groups(plan):
        for r in group:
            w(f"acc_{r.name} = tl.full([BLOCK], {_NEUTRAL[r.reduce]}, tl.float32)")
        w("flat = rflat")
        with w.block("for i in range(0, R):"):
            _emit_chain(w, m, [r.deps[0] for r in group], True)
            for r in group:
                w(f"acc_{r.name} = " + _COMBINE[r.reduce].format(acc=f"acc_{r.name}", x=r.deps[0]))
            w("flat = flat + INNER")
        for r in group:
            w(f"{r.name} = acc_{r.name}")
            done.add(r.name)
        _emit_outside(w, m, done, True)
    out = plan.value(plan.output)
    if out.level == "full":
        w("flat = rflat")
        with w.block("for i in range(0, R):"):
            _emit_chain(w, m, [plan.output], True)
            w(_store(m, plan.output, "flat", True))
            w("flat = flat + INNER")
    else:
        w(_store(m, plan.output, "outer * INNER + lanes", True))


_SIZES = {"flat": ["N"], "row": ["R"], "column": ["R", "INNER", "NBLK"]}
_CONSTEXPR = {"flat": ["BLOCK"], "row": ["BLOCK", "SINGLE"], "column": ["BLOCK"]}


def kernel_source(m: Match) -> str:
    """The ``@triton.jit`` kernel computing ``m``'s region."""
    w = _Writer()
    {"flat": _flat, "row": _row, "column": _column}[m.mode](w, m)
    params = (["out_ptr"] + [f"in{o.index}_ptr" for o in m.plan.operands] + _operand_args(m)
              + _SIZES[m.mode] + list(m.plan.runtime_args)
              + [f"{c}: tl.constexpr" for c in _CONSTEXPR[m.mode]])
    head = f"@triton.jit\ndef {KERNEL}({', '.join(params)}):\n"
    return head + "\n".join(w.lines) + "\n"


def launcher_prologue(m: Match, name: str) -> tuple[list[str], list[str]]:
    """The start of a launcher, whatever the backend: its signature, contiguous operands, the
    output allocated with the region's shape, and each operand's index sizes read from the tensor
    of shape ``S``. Returns (lines, the size names defined)."""
    plan = m.plan
    main = f"in{m.main}"
    ins = [f"in{o.index}" for o in plan.operands]
    lines = [f"def {name}({', '.join(ins)}):"]
    lines += [f"    {x} = {x}.contiguous()" for x in ins]
    out = plan.value(plan.output)
    a, b = plan.reduce_lo, plan.reduce_hi
    if out.level == "full":
        shape = f"{main}.shape"
    elif out.keep:
        shape = f"tuple({main}.shape[:{a}]) + (1,) * {b - a} + tuple({main}.shape[{b}:])"
    else:
        shape = f"tuple({main}.shape[:{a}]) + tuple({main}.shape[{b}:])"
    lines.append(f"    out = torch.empty({shape}, dtype={main}.dtype, device={main}.device)")
    sizes: list[str] = []
    for o in plan.operands:
        div, span = index_parts(m, o)
        if div:
            lines.append(f"    {div} = {main}.shape[{o.hi}:].numel()")
            sizes.append(div)
        if span:
            lines.append(f"    {span} = {main}.shape[{o.lo}:{o.hi}].numel()")
            sizes.append(span)
    return lines, sizes


def launcher_source(m: Match, block: int, num_warps: int) -> str:
    """The Python function that allocates the output and launches the kernel (no other path)."""
    plan = m.plan
    main = f"in{m.main}"
    ins = [f"in{o.index}" for o in plan.operands]
    a, b = plan.reduce_lo, plan.reduce_hi
    lines, sizes = launcher_prologue(m, LAUNCHER)
    if m.mode == "flat":
        lines.append(f"    N = {main}.numel()")
        lines.append(f"    BLOCK = {block}")
        grid, consts = "(triton.cdiv(N, BLOCK),)", "BLOCK=BLOCK"
        sizes += ["N"]
    elif m.mode == "row":
        lines.append(f"    R = {main}.shape[{a}:].numel()")
        lines.append(f"    BLOCK = max(16, min({block}, triton.next_power_of_2(R)))")
        grid, consts = f"({main}.shape[:{a}].numel(),)", "BLOCK=BLOCK, SINGLE=R <= BLOCK"
        sizes += ["R"]
    else:
        lines.append(f"    R = {main}.shape[{a}:{b}].numel()")
        lines.append(f"    INNER = {main}.shape[{b}:].numel()")
        lines.append(f"    BLOCK = max(16, min({block}, triton.next_power_of_2(INNER)))")
        lines.append("    NBLK = triton.cdiv(INNER, BLOCK)")
        grid, consts = f"({main}.shape[:{a}].numel() * NBLK,)", "BLOCK=BLOCK"
        sizes += ["R", "INNER", "NBLK"]
    for name, expression in plan.runtime_args.items():
        lines.append(f"    {name} = {expression.format(main=main)}")
        sizes.append(name)
    args = ", ".join(["out", *ins, *sizes])
    lines.append(f"    {KERNEL}[{grid}]({args}, {consts}, num_warps={num_warps})")
    lines.append("    return out")
    return "\n".join(lines) + "\n"

"""C++ source from a matched region: one CPU kernel, built by ``load_inline``, and its launcher.

The kernel walks the region the way the Triton kernel's looped form does (``triton/source.py``),
with the CPU's shape of parallelism: rows (``row`` mode) or blocks of elements (``flat``) are
shared between torch's intra-op threads by ``at::parallel_for`` (so ``torch.set_num_threads``,
which the campaign sets, is the kernel's thread count too), and each pass over a row is one
``#pragma omp simd`` loop the compiler vectorises for the host (``-march=native``), reductions
kept per lane and combined at the end. A row is walked once per group of dependent reductions
(softmax: max, then the sum of exponentials) and once more to store; a row of a few hundred KB
stays in the core's L2 between passes, which is where eager PyTorch pays a full read and write
of memory per op.

The transcendental functions are written out (``math.py``: glibc's are calls the compiler does
not vectorise). Only float32 tensors on the CPU are computed (the move is offered only there);
anything else is a ``TORCH_CHECK`` error, not a silent path back to PyTorch's ops.

Modes: ``flat``, ``row`` and ``column`` (a reduction over middle dims, NCHW channels: per task
one outer index and ``LANES`` consecutive inner positions, an accumulator per lane; ``_column``).
"""

from __future__ import annotations

import hashlib

from ..triton.plan import Plan, Unsupported, Value
from ..triton.region import Match
from ..triton.source import groups, index_parts, launcher_prologue, outside
from .expr import translate
from .math import MATH

KERNEL = "_arbor_cpu_kernel"
LAUNCHER = "_arbor_fused"
SOURCE = "_ARBOR_CPP"
EXTENSION = "_arbor_ext"
FLAGS = ("-O3", "-march=native", "-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math", "-freciprocal-math")
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
    if m.mode == "row" and o.level == "full" and o.lo >= m.plan.reduce_lo and o.hi == m.plan.ndim:
        return f"{ptr}[c % {span}]" if span else f"{ptr}[c]"
    if m.mode == "flat" and o.level == "full" and (div or span) and split(m) is not None:
        return f"{ptr}[q{o.index}]" if o.hi < m.plan.ndim else f"{ptr}[q{o.index} + j]"
    idx = "flat" if o.level == "full" else "rflat"
    if div:
        idx = f"({idx} / {div})"
    if span:
        idx = f"({idx} % {span})"
    return f"{ptr}[{idx}]"


def _emit_value(w: _Writer, m: Match, v: Value) -> None:
    if v.operand is not None:
        w(f"const float {v.name} = {_load(m, v)};")
    elif v.reduce is None:
        w(f"const float {v.name} = {translate(v.code)};")


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


def _kept(plan: Plan, last_group: list[Value]) -> str | None:
    """A costly value (one with a function call: exp, log, erf...) that the last pass over the row
    computes anyway and the store pass needs: the last pass writes it to the output, the store
    pass reads it back (softmax: one exp per element instead of two)."""
    if plan.value(plan.output).level != "full":
        return None
    computed = set(plan.full_chain([r.deps[0] for r in last_group]))
    shared = [n for n in plan.full_chain([plan.output]) if n in computed and plan.value(n).operand is None]
    costly = [n for n in shared if any("tl." in plan.value(d).code for d in plan.full_chain([n]))]
    return costly[-1] if costly else None


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


def _flat(w: _Writer, m: Match) -> None:
    plan = m.plan
    k = split(m)
    if k is None:
        w.open("at::parallel_for(0, N, 16384, [&](int64_t begin, int64_t end)")
        _emit_outside(w, m, set())
        w("#pragma omp simd")
        w.open("for (int64_t flat = begin; flat < end; ++flat)")
    else:
        w.open("at::parallel_for(0, N / INNER, std::max<int64_t>(1, 16384 / std::max<int64_t>(INNER, 1)), "
               "[&](int64_t begin, int64_t end)")
        w.open("for (int64_t outer = begin; outer < end; ++outer)")
        w("const int64_t base = outer * INNER;")
        for o in plan.operands:
            div, span = index_parts(m, o)
            if o.level == "full" and (div or span):
                q = f"(base / {div})" if div else "base"
                w(f"const int64_t q{o.index} = {q} % {span};" if span else f"const int64_t q{o.index} = {q};")
        _emit_outside(w, m, set())
        w("#pragma omp simd")
        w.open("for (int64_t j = 0; j < INNER; ++j)")
        w("const int64_t flat = base + j;")
    _emit_chain(w, m, [plan.output])
    w(f"o[flat] = {plan.output};")
    w.close()
    if k is not None:
        w.close()
    w.close("});")


def _row(w: _Writer, m: Match) -> None:
    plan = m.plan
    w.open("at::parallel_for(0, ROWS, std::max<int64_t>(1, 16384 / std::max<int64_t>(R, 1)), "
           "[&](int64_t begin, int64_t end)")
    w.open("for (int64_t row = begin; row < end; ++row)")
    w("const int64_t rflat = row * R;")
    done: set[str] = set()
    _emit_outside(w, m, done)
    passes = groups(plan)
    kept = _kept(plan, passes[-1])
    for k, group in enumerate(passes):
        for r in group:
            w(f"float acc_{r.name} = {_NEUTRAL[r.reduce]};")
        clauses = " ".join(f"reduction({_CLAUSE[r.reduce]}:acc_{r.name})" for r in group)
        w(f"#pragma omp simd {clauses}")
        w.open("for (int64_t c = 0; c < R; ++c)")
        w("const int64_t flat = rflat + c;")
        last = k == len(passes) - 1
        _emit_chain(w, m, [r.deps[0] for r in group] + ([kept] if last and kept else []))
        if last and kept:
            w(f"o[flat] = {kept};")
        for r in group:
            w(_COMBINE[r.reduce].format(acc=f"acc_{r.name}", x=r.deps[0]))
        w.close()
        for r in group:
            w(f"const float {r.name} = acc_{r.name};")
            done.add(r.name)
        _emit_outside(w, m, done)
    out = plan.value(plan.output)
    if out.level == "full":
        w("#pragma omp simd")
        w.open("for (int64_t c = 0; c < R; ++c)")
        w("const int64_t flat = rflat + c;")
        _emit_chain(w, m, [plan.output], kept)
        w(f"o[flat] = {plan.output};")
        w.close()
    else:
        w(f"o[row] = {plan.output};")
    w.close()
    w.close("});")


LANES = 256  # column mode: inner positions one task keeps accumulators for (R x LANES floats stay in L2)


def _lane_loop(w: _Writer, rows: list[str], position: bool) -> None:
    """Open a vectorised loop over a task's lanes, with the row values computed so far (arrays
    per lane) as scalars, and ``rflat`` (the lane's element at reduced index 0) when asked."""
    w("#pragma omp simd")
    w.open("for (int64_t l = 0; l < nl; ++l)")
    if position:
        w("const int64_t rflat = start + l;")
    for name in rows:
        w(f"const float {name} = {name}_a[l];")


def _column_outside(w: _Writer, m: Match, done: set[str], rows: list[str]) -> None:
    """Row and const values now computable: a const once per task, a row value per lane."""
    while True:
        ready = outside(m.plan, done)
        if not ready:
            return
        for v in ready:
            if v.level == "const":
                _emit_value(w, m, v)
                continue
            w(f"float {v.name}_a[LANES];")
            _lane_loop(w, rows, True)
            _emit_value(w, m, v)
            w(f"{v.name}_a[l] = {v.name};")
            w.close()
            rows.append(v.name)


def _column(w: _Writer, m: Match) -> None:
    """Reduced dims in the middle (RMSNorm over NCHW channels): the domain is OUTER x R x INNER,
    and a task is one outer index and ``LANES`` consecutive inner positions. Each pass walks the
    R reduced indices, each a vectorised loop over the lanes (consecutive in memory) with one
    accumulator per lane, so no pass needs a reduction across lanes; the task's R x LANES block
    (64 KB for 64 channels) stays in L2 between the passes and the store."""
    plan = m.plan
    w("const int64_t NBLK = (INNER + LANES - 1) / LANES;")
    w.open("at::parallel_for(0, OUTER * NBLK, 1, [&](int64_t begin, int64_t end)")
    w.open("for (int64_t task = begin; task < end; ++task)")
    w("const int64_t outer = task / NBLK;")
    w("const int64_t l0 = (task % NBLK) * LANES;")
    w("const int64_t nl = std::min<int64_t>(LANES, INNER - l0);")
    w("const int64_t start = outer * R * INNER + l0;")
    done: set[str] = set()
    rows: list[str] = []
    _column_outside(w, m, done, rows)
    for group in groups(plan):
        for r in group:
            w(f"float acc_{r.name}[LANES];")
        w("#pragma omp simd")
        w.open("for (int64_t l = 0; l < nl; ++l)")
        for r in group:
            w(f"acc_{r.name}[l] = {_NEUTRAL[r.reduce]};")
        w.close()
        w.open("for (int64_t i = 0; i < R; ++i)")
        _lane_loop(w, rows, True)
        w("const int64_t flat = rflat + i * INNER;")
        _emit_chain(w, m, [r.deps[0] for r in group])
        for r in group:
            w(_COMBINE[r.reduce].format(acc=f"acc_{r.name}[l]", x=r.deps[0]))
        w.close()
        w.close()
        for r in group:
            w(f"float* {r.name}_a = acc_{r.name};")
            rows.append(r.name)
            done.add(r.name)
        _column_outside(w, m, done, rows)
    out = plan.value(plan.output)
    if out.level == "full":
        w.open("for (int64_t i = 0; i < R; ++i)")
        _lane_loop(w, rows, True)
        w("const int64_t flat = rflat + i * INNER;")
        _emit_chain(w, m, [plan.output])
        w(f"o[flat] = {plan.output};")
        w.close()
        w.close()
    else:
        _lane_loop(w, rows, False)
        w(f"o[outer * INNER + l0 + l] = {plan.output};")
        w.close()
    w.close()
    w.close("});")


def _sizes(m: Match) -> list[str]:
    out = []
    for o in m.plan.operands:
        div, span = index_parts(m, o)
        out += [a for a in (div, span) if a]
    if m.mode == "row":
        return out + ["R", "ROWS"]
    if m.mode == "column":
        return out + ["R", "INNER", "OUTER"]
    return out + ["N"] + (["INNER"] if split(m) is not None else [])


def kernel_source(m: Match) -> str:
    """The C++ translation unit: the math, then the kernel taking the output and the operands."""
    plan: Plan = m.plan
    tensors = ["out"] + [f"in{o.index}" for o in plan.operands]
    params = ([f"torch::Tensor {t}" for t in tensors] + [f"int64_t {s}" for s in _sizes(m)]
              + [f"double {name}_arg" for name in plan.runtime_args])
    w = _Writer()
    checks = " && ".join(f"{t}.device().is_cpu() && {t}.scalar_type() == at::kFloat && {t}.is_contiguous()"
                         for t in tensors)
    w(f'TORCH_CHECK({checks}, "the generated C++ kernel computes contiguous float32 CPU tensors only");')
    w("float* __restrict__ o = out.data_ptr<float>();")
    for o in plan.operands:
        w(f"const float* __restrict__ p{o.index} = in{o.index}.data_ptr<float>();")
    for name in plan.runtime_args:
        w(f"const float {name} = (float){name}_arg;")
    if m.mode == "column":
        w(f"constexpr int64_t LANES = {LANES};")
    {"flat": _flat, "row": _row, "column": _column}[m.mode](w, m)
    body = "\n".join(w.lines)
    return f"{MATH}\nvoid {KERNEL}({', '.join(params)}) {{\n{body}\n}}\n"


def extension_name(kernel: str) -> str:
    """A name per source: load_inline keeps one module per name in a process."""
    return "arbor_fused_" + hashlib.sha256(kernel.encode()).hexdigest()[:16]


def module_source(kernel: str) -> str:
    """The module-level code that builds the extension at import (a compile error is the
    candidate's ``compile_error``)."""
    flags = ", ".join(repr(f) for f in FLAGS)
    return (f"{SOURCE} = {kernel!r}\n"
            f"{EXTENSION} = load_inline(name={extension_name(kernel)!r}, cpp_sources={SOURCE}, "
            f"functions=[{KERNEL!r}], extra_cflags=[{flags}], verbose=False)\n")


def launcher_source(m: Match) -> str:
    """The Python function that allocates the output and calls the kernel (no other path)."""
    plan = m.plan
    main = f"in{m.main}"
    ins = [f"in{o.index}" for o in plan.operands]
    lines, _ = launcher_prologue(m, LAUNCHER)
    if m.mode == "flat":
        lines.append(f"    N = {main}.numel()")
        if split(m) is not None:
            lines.append(f"    INNER = {main}.shape[{split(m)}:].numel()")
    elif m.mode == "row":
        lines.append(f"    R = {main}.shape[{plan.reduce_lo}:].numel()")
        lines.append(f"    ROWS = {main}.shape[:{plan.reduce_lo}].numel()")
    else:
        a, b = plan.reduce_lo, plan.reduce_hi
        lines.append(f"    R = {main}.shape[{a}:{b}].numel()")
        lines.append(f"    INNER = {main}.shape[{b}:].numel()")
        lines.append(f"    OUTER = {main}.shape[:{a}].numel()")
    for name, expression in plan.runtime_args.items():
        lines.append(f"    {name} = {expression.format(main=main)}")
    args = ", ".join(["out", *ins, *_sizes(m), *plan.runtime_args])
    lines.append(f"    {EXTENSION}.{KERNEL}({args})")
    lines.append("    return out")
    return "\n".join(lines) + "\n"

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
one outer index and ``LANES`` consecutive inner positions, an accumulator per lane; ``column.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from ..triton.plan import Plan, Unsupported, Value
from ..triton.region import Match
from ..triton.source import groups, index_parts, launcher_prologue
from .column import LANES, column
from .emit import _emit_chain, _emit_outside, _Writer, per_column, plain_operands, split
from .math import MATH
from .onepass import first_pass, fold_values, folded
from .reduce import reduce_pass
from .names import EXTENSION, FLAGS, KERNEL, LAUNCHER, SOURCE, extension_name
from .schedule import KNOBS, MODE_DEFAULTS, RUNTIME, header

__all__ = ["EXTENSION", "FLAGS", "KERNEL", "LAUNCHER", "SOURCE", "extension_name", "kernel_source",
           "launcher_source", "module_source", "split"]

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


def _flat(w: _Writer, m: Match) -> None:
    plan = m.plan
    k = split(m)
    if k is None:
        w.open("at::parallel_for(0, N, 16384, [&](int64_t begin, int64_t end)")
        w("alignas(64) float arbor_buf[ARBOR_BLOCK > 0 ? ARBOR_BLOCK : 1];")
        _emit_outside(w, m, set())
        _store_loop(w, m, "flat", "begin", "end", "", lambda: _emit_chain(w, m, [plan.output]))
        w.close("});")
        return
    else:
        w.open("at::parallel_for(0, N / INNER, std::max<int64_t>(1, 16384 / std::max<int64_t>(INNER, 1)), "
               "[&](int64_t begin, int64_t end)")
        w("alignas(64) float arbor_buf[ARBOR_BLOCK > 0 ? ARBOR_BLOCK : 1];")
        w.open("for (int64_t outer = begin; outer < end; ++outer)")
        w("const int64_t base = outer * INNER;")
        for o in plan.operands:
            div, span = index_parts(m, o)
            if o.level == "full" and (div or span):
                q = f"(base / {div})" if div else "base"
                w(f"const int64_t q{o.index} = {q} % {span};" if span else f"const int64_t q{o.index} = {q};")
        _emit_outside(w, m, set())

        def body() -> None:
            w("const int64_t flat = base + j;")
            _emit_chain(w, m, [plan.output])

        _store_loop(w, m, "j", "0", "INNER", "base", body)
    w.close()
    w.close("});")


def _store_loop(w: _Writer, m: Match, var: str, lo: str, hi: str, offset: str, body: Callable[[], None]) -> None:
    """The loop that computes and stores the output over ``var`` in [lo, hi) (element
    ``offset + var``), at the kernel's schedule (``schedule.py``): with ``ARBOR_BLOCK``, blocks
    computed into an L1 buffer (``arbor_buf``), the input lines ``ARBOR_PREFETCH`` elements
    ahead prefetched, and the block stored by ``arbor_store`` (non-temporal with
    ``ARBOR_STREAM``); without, one vectorised loop
    storing in place. ``body`` emits ``flat`` and the output's value."""
    plain = plain_operands(m)
    at = f"{offset} + " if offset else ""
    w("#if ARBOR_BLOCK")
    w.open(f"for (int64_t b0 = {lo}; b0 < {hi}; b0 += ARBOR_BLOCK)")
    w(f"const int64_t b1 = std::min<int64_t>({hi}, b0 + ARBOR_BLOCK);")
    if plain:
        w("#if ARBOR_PREFETCH")
        for o in plain:  # each at its own index: a row's weight at c, not at the row's offset
            base = "0" if per_column(m, o) else (offset or "0")
            w(f"arbor_prefetch(p{o.index} + {base}, b0 + ARBOR_PREFETCH, b1 + ARBOR_PREFETCH, {hi});")
        w("#endif")
    w("#pragma omp simd")
    w.open(f"for (int64_t {var} = b0; {var} < b1; ++{var})")
    body()
    w(f"arbor_buf[{var} - b0] = {m.plan.output};")
    w.close()
    w(f"arbor_store(o + {at}b0, arbor_buf, b1 - b0, arbor_nt);")
    w.close()
    w("#else")
    w("#pragma omp simd")
    w.open(f"for (int64_t {var} = {lo}; {var} < {hi}; ++{var})")
    body()
    w(f"o[flat] = {m.plan.output};")
    w.close()
    w("#endif")


def _row(w: _Writer, m: Match) -> None:
    plan = m.plan
    w.open("at::parallel_for(0, ROWS, std::max<int64_t>(1, 16384 / std::max<int64_t>(R, 1)), "
           "[&](int64_t begin, int64_t end)")
    if plan.value(plan.output).level == "full":
        w("alignas(64) float arbor_buf[ARBOR_BLOCK > 0 ? ARBOR_BLOCK : 1];")
    w.open("for (int64_t row = begin; row < end; ++row)")
    w("const int64_t rflat = row * R;")
    done: set[str] = set()
    _emit_outside(w, m, done)
    passes = groups(plan)
    kept = _kept(plan, passes[-1])
    fold = folded(plan, passes)
    if fold and len(passes) == 2 and (kept or _kept(plan, passes[0])):
        fold = None  # the last pass would change: its kept value with it (never for a norm)

    def one(k: int, group: list[Value]) -> None:
        last = k == len(passes) - 1

        def body() -> None:
            w("const int64_t flat = rflat + c;")
            _emit_chain(w, m, [r.deps[0] for r in group] + ([kept] if last and kept else []))
            if last and kept:
                w(f"o[flat] = {kept};")

        reduce_pass(w, group, body)
        for r in group:
            w(f"const float {r.name} = acc_{r.name};")
            done.add(r.name)
        _emit_outside(w, m, done)

    start = 0
    if fold:  # onepass.py: the second pass's centred sums of squares folded into the first
        w("#if ARBOR_ONEPASS")
        first_pass(w, m, passes[0], fold)
        before = set(done)
        for r in passes[0]:
            w(f"const float {r.name} = acc_{r.name};")
            done.add(r.name)
        _emit_outside(w, m, done)
        fold_values(w, fold)
        done.update(r.name for r in passes[1])
        _emit_outside(w, m, done)
        w("#else")
        done.clear()
        done.update(before)
        one(0, passes[0])
        one(1, passes[1])
        w("#endif")
        start = 2
    for k in range(start, len(passes)):
        one(k, passes[k])
    out = plan.value(plan.output)
    if out.level == "full":
        def body() -> None:
            w("const int64_t flat = rflat + c;")
            _emit_chain(w, m, [plan.output], kept)

        _store_loop(w, m, "c", "0", "R", "rflat", body)
    else:
        w(f"o[row] = {plan.output};")
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
        w(f"constexpr int64_t LANES = ARBOR_BLOCK > 0 ? ARBOR_BLOCK : {LANES};")
        column(w, m)
    else:
        {"flat": _flat, "row": _row}[m.mode](w, m)
    part, outer = _outlined(w.lines, m)
    body = "\n".join(outer)
    read = knobs(m, part)
    full = m.plan.value(m.plan.output).level == "full"
    # a mode's own defaults are a normalisation's (a full output); a reduction keeps the global ones
    own = {k: v for k, v in MODE_DEFAULTS.get(m.mode, {}).items() if k in read} if full else {}
    return (f"{header(read, defaults=own)}{RUNTIME}{MATH}\n{part}\n"
            f"void {KERNEL}({', '.join(params)}) {{\n{body}\n}}\n")


def _outlined(lines: list[str], m: Match) -> tuple[str, str]:
    """The kernel's ``parallel_for`` body as its own function (``arbor_part``), its pointers
    ``__restrict__`` parameters, and the kernel's lines calling it. Inside a lambda the pointers
    and sizes are captured by reference: a store through ``__m256`` (``may_alias``: what
    ``arbor_store`` writes) may then overwrite the pointer itself, so GCC reloaded ``p0`` every
    element and read the row with gathers (the blocked schedule points at 0.28-0.35x torch)."""
    start = next(i for i, line in enumerate(lines) if "at::parallel_for(" in line)
    end = max(i for i, line in enumerate(lines) if line.strip() == "});")
    plan = m.plan
    params = (["float* __restrict__ o"] + [f"const float* __restrict__ p{o.index}" for o in plan.operands]
              + [f"const int64_t {s}" for s in _sizes(m)] + [f"const float {n}" for n in plan.runtime_args]
              + ["const int64_t begin", "const int64_t end"])
    names = ", ".join(p.split()[-1] for p in params)
    pre = ["  constexpr bool arbor_nt = ARBOR_STREAM != 0;"]
    pre += [line for line in lines[:start] if "constexpr int64_t LANES" in line or "NBLK =" in line]
    inner = pre + [line[2:] for line in lines[start + 1:end]] + ["  arbor_fence(arbor_nt);"]
    part = "namespace {\nvoid arbor_part(" + ", ".join(params) + ") {\n" + "\n".join(inner) + "\n}\n}  // namespace\n"
    call = lines[:start + 1] + [lines[start + 1][:len(lines[start + 1]) - len(lines[start + 1].lstrip())]
                                + f"arbor_part({names});", lines[end]] + lines[end + 1:]
    return part, call


def knobs(m: Match, body: str = "") -> tuple[str, ...]:
    """The schedule knobs this kernel reads (``schedule.py``): the store loop's only where the
    output is stored element by element (``_store_loop``), or in column mode the lane block and
    its prefetch always and the streaming store where the output is full (``column.py``), the
    lanes only in row reductions (``reduce.py``), the erf form only where ``body`` calls it, the
    unroller everywhere."""
    full = m.plan.value(m.plan.output).level == "full"
    stored, column = m.mode in ("flat", "row") and full, m.mode == "column"
    read = {"unroll": True, "block": stored or column, "stream": stored or (column and full),
            "prefetch": stored or column,
            "lanes": m.mode == "row" and bool(m.plan.reductions), "erf": "arbor_erf(" in body,
            "onepass": "#if ARBOR_ONEPASS" in body}
    return tuple(k for k in KNOBS if read[k])


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

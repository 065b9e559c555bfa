"""Column mode of the generated C++ kernel: a reduction over middle dims (RMSNorm over NCHW
channels), the domain OUTER x R x INNER, a task one outer index and ``LANES`` consecutive inner
positions with an accumulator per lane (``source.py`` writes the other modes).

Its schedule (``schedule.py``): ``block`` is the task's lane count (0: ``LANES``); ``stream``
writes each reduced index's lanes through an L1 buffer with non-temporal stores; ``prefetch``
asks, during the task's last pass (which reads its block back from L2, so the memory bus is
idle), for the input that many lanes ahead: the next task's block at the block size. The task
reads R strided streams (64 for 64 channels), more than a core's stream prefetcher follows. Side
by side on the development VM (one thread, load 1.0, inputs rotated through 128 MB, RMSNorm over
64 channels of 128x128): 1024 lanes stored in place 6.7 ms, streamed 6.0 ms, at 256 lanes
streamed and prefetched one block ahead 5.0 ms; eager 14.0 ms, torch.compile 10.4 ms.
"""

from __future__ import annotations

from ..triton.region import Match
from ..triton.source import groups, outside
from .emit import _COMBINE, _NEUTRAL, _emit_chain, _emit_value, _Writer, plain_operands

# column mode: inner positions one task keeps accumulators for (R x LANES floats stay in L2). At
# 256 a task read 1 KB of each 2.3 KB row of a (585, 585) slab and the next task came back for the
# rest: the sum over dim 1 ran 0.76x torch; at 1024 (one task a row there) 1.48x, and the
# RMSNorm over 64 channels of 128x128 2.01x against 1.67x (one thread, CPU time, load 4.3).
LANES = 1024


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


def column(w: _Writer, m: Match) -> None:
    """Reduced dims in the middle (RMSNorm over NCHW channels): the domain is OUTER x R x INNER,
    and a task is one outer index and ``LANES`` consecutive inner positions. Each pass walks the
    R reduced indices, each a vectorised loop over the lanes (consecutive in memory) with one
    accumulator per lane, so no pass needs a reduction across lanes; the task's R x LANES block
    (256 KB for 64 channels) stays in L2 between the passes and the store."""
    plan = m.plan
    w("const int64_t NBLK = (INNER + LANES - 1) / LANES;")
    w.open("at::parallel_for(0, OUTER * NBLK, 1, [&](int64_t begin, int64_t end)")
    w.open("for (int64_t task = begin; task < end; ++task)")
    w("const int64_t outer = task / NBLK;")
    w("const int64_t l0 = (task % NBLK) * LANES;")
    w("const int64_t nl = std::min<int64_t>(LANES, INNER - l0);")
    w("const int64_t start = outer * R * INNER + l0;")
    full = plan.value(plan.output).level == "full"
    if full:  # the streamed stores' buffer
        w("#if ARBOR_STREAM")
        w("alignas(64) float arbor_buf[LANES];")
        w("#endif")
    done: set[str] = set()
    rows: list[str] = []
    _column_outside(w, m, done, rows)
    passes = groups(plan)
    for k, group in enumerate(passes):
        for r in group:
            w(f"float acc_{r.name}[LANES];")
        w("#pragma omp simd")
        w.open("for (int64_t l = 0; l < nl; ++l)")
        for r in group:
            w(f"acc_{r.name}[l] = {_NEUTRAL[r.reduce]};")
        w.close()
        w.open("for (int64_t i = 0; i < R; ++i)")
        if not full and k == len(passes) - 1:  # the last pass over the inputs
            _prefetch(w, m)
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
    if full:
        w.open("for (int64_t i = 0; i < R; ++i)")
        _prefetch(w, m)
        _lane_loop(w, rows, True)
        w("const int64_t flat = rflat + i * INNER;")
        _emit_chain(w, m, [plan.output])
        w("#if ARBOR_STREAM")
        w(f"arbor_buf[l] = {plan.output};")
        w("#else")
        w(f"o[flat] = {plan.output};")
        w("#endif")
        w.close()
        w("#if ARBOR_STREAM")
        w("arbor_store(o + start + i * INNER, arbor_buf, nl, true);")
        w("#endif")
        w.close()
    else:
        _lane_loop(w, rows, False)
        w(f"o[outer * INNER + l0 + l] = {plan.output};")
        w.close()
    w.close()
    w.close("});")


def _prefetch(w: _Writer, m: Match) -> None:
    """In the last pass, at reduced index ``i``: each input read along the whole domain, the lanes
    ``ARBOR_PREFETCH`` ahead of this task's (clamped to the tensor; a prefetch never faults, but
    it need not fetch what is not there)."""
    plain = plain_operands(m)
    if not plain:
        return
    w("#if ARBOR_PREFETCH")
    w("const int64_t here = start + i * INNER;")
    for o in plain:
        w(f"arbor_prefetch(p{o.index} + here, ARBOR_PREFETCH, ARBOR_PREFETCH + nl, OUTER * R * INNER - here);")
    w("#endif")

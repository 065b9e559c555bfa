"""One pass over a row of the generated C++ kernel (``source.py``'s row mode) that computes a group
of reductions, at the kernel's ``ARBOR_LANES`` schedule point.

``#pragma omp simd reduction(...)`` gives the vectoriser one vector accumulator: every vector of
the row waits on the previous one's ``max`` or ``add`` (3-4 cycles on this AMD EPYC), and GCC does
not split a float accumulator without ``-fassociative-math``. A hand-written AVX2 softmax with four
independent accumulators in its max pass and two in its sum pass ran 2.44x ``torch.softmax``
where the generated one ran 1.17x (issue 41). With ``ARBOR_LANES`` > 0 the pass keeps that many
accumulators, one per element of a block of the row: the inner loop over the block has a
constant trip count, so the compiler vectorises it into ``LANES / width`` independent vector
chains, and the lanes are combined pairwise at the end of the row, halving, each step a
vectorised loop (the result is deterministic; a sum is reassociated once, as any vectorised sum
is). The row's last ``R % LANES`` elements are a tail, an ``omp simd`` reduction of its own.
``ARBOR_LANES 0`` is the single-accumulator loop.
"""

from __future__ import annotations

from collections.abc import Callable

from ..triton.plan import Value
from .emit import _CLAUSE, _COMBINE, _NEUTRAL, _Writer


def reduce_pass(w: _Writer, group: list[Value], body: Callable[[], None]) -> None:
    """The loops of one pass over ``c`` in [0, R) that fold each of ``group``'s reductions into
    ``acc_<name>``; ``body`` emits, inside a loop whose ``c`` is defined, ``flat`` and the values
    the reductions read (and any store the pass makes)."""
    for r in group:
        w(f"float acc_{r.name} = {_NEUTRAL[r.reduce]};")
    w("{")  # the pass's own scope: its lanes and counters
    w.depth += 1
    w("int64_t c0 = 0;")
    w("#if ARBOR_LANES")
    for r in group:
        w(f"alignas(64) float lane_{r.name}[ARBOR_LANES];")
    w.open("for (int64_t l = 0; l < ARBOR_LANES; ++l)")
    for r in group:
        w(f"lane_{r.name}[l] = {_NEUTRAL[r.reduce]};")
    w.close()
    w.open("for (; c0 + ARBOR_LANES <= R; c0 += ARBOR_LANES)")
    w("#pragma omp simd")
    w.open("for (int64_t l = 0; l < ARBOR_LANES; ++l)")
    w("const int64_t c = c0 + l;")
    body()
    for r in group:
        w(_COMBINE[r.reduce].format(acc=f"lane_{r.name}[l]", x=r.deps[0]))
    w.close()
    w.close()
    # the lanes combined pairwise, halving: each step a vectorised loop, where a scalar loop over
    # them waited on one add's latency per lane (64 lanes x 2 sums: ~500 cycles a 512-element row)
    w.open("for (int64_t half = ARBOR_LANES / 2; half > 0; half /= 2)")
    w("#pragma omp simd")
    w.open("for (int64_t l = 0; l < half; ++l)")
    for r in group:
        w(_COMBINE[r.reduce].format(acc=f"lane_{r.name}[l]", x=f"lane_{r.name}[l + half]"))
    w.close()
    w.close()
    for r in group:
        w(_COMBINE[r.reduce].format(acc=f"acc_{r.name}", x=f"lane_{r.name}[0]"))
    w("#endif")
    # the whole row, or the tail after the lanes: vectorised either way (a scalar tail of 33
    # elements in each pass cost the op-by-op LayerNorm's 609-element rows ~1.8x per element)
    clauses = " ".join(f"reduction({_CLAUSE[r.reduce]}:acc_{r.name})" for r in group)
    w(f"#pragma omp simd {clauses}")
    w.open("for (int64_t c = c0; c < R; ++c)")
    body()
    for r in group:
        w(_COMBINE[r.reduce].format(acc=f"acc_{r.name}", x=r.deps[0]))
    w.close()
    w.close()

"""Row normalisations in two passes over the row instead of three (the ``onepass`` knob).

LayerNorm as the plan writes it reads the row three times: the sum (for the mean), the sum of
squared deviations from that mean (for the variance), and the normalising store. The second pass
waits on the first pass's result only through the mean ``m``, and

    sum((a - m)^2) = S2 - 2 (m - K) S1 + R (m - K)^2,  S1 = sum(a - K),  S2 = sum((a - K)^2)

holds for any shift ``K``. With ``ARBOR_ONEPASS 1`` the first pass also accumulates ``S1`` and
``S2`` (split accumulators like every other reduction of the pass, ``reduce.py``), with ``K`` the
row's first element, and the variance's pass is gone (the mean's own sum is then ``R K + S1``): the row is read twice, and on a row larger
than L2 (nn.LayerNorm over C*H*W: 4 MB) that is a third less traffic. The shift keeps the
cancellation of the textbook ``E[x^2] - E[x]^2`` away: ``a - K`` is of the order of the row's
spread, not of its mean, so a row with mean 1e3 and unit spread loses no more than one centred
the exact way (tests/agents/test_cpp_reduce.py checks such rows against torch).

Folded: every reduction of the second pass is ``sum(d * d)`` with ``d = a - m``, ``a`` a full
value computed from loads alone and ``m`` a row value; anything else keeps its own pass.
"""

from __future__ import annotations

from ..triton.plan import Plan, Value
from ..triton.region import Match
from .emit import _emit_chain, _Writer
from .reduce import reduce_pass


def centred(plan: Plan, r: Value) -> tuple[str, str, str] | None:
    """(a, m, d) when ``r`` sums ``d * d`` with ``d = a - m`` as above; None otherwise."""
    if r.reduce != "sum" or plan.level_of(r.deps[0]) != "full":
        return None
    sq = plan.value(r.deps[0])
    if sq.operand is not None or not sq.deps or set(sq.deps) != {sq.deps[0]} \
            or sq.code != f"({sq.deps[0]} * {sq.deps[0]})":
        return None
    d = plan.value(sq.deps[0])
    if d.operand is not None or d.reduce or len(d.deps) != 2 or d.code != f"({d.deps[0]} - {d.deps[1]})":
        return None
    a, m = d.deps
    if plan.level_of(a) != "full" or plan.level_of(m) != "row":
        return None
    if any(plan.level_of(x) not in ("full", "const") for n in plan.full_chain([a]) for x in plan.value(n).deps):
        return None
    return a, m, d.name


def folded(plan: Plan, passes: list[list[Value]]) -> list[tuple[Value, str, str]] | None:
    """The second pass's reductions as (r, a, m) when every one of them folds into the first."""
    if len(passes) < 2:
        return None
    out = []
    for r in passes[1]:
        c = centred(plan, r)
        if c is None:
            return None
        out.append((r, c[0], c[1]))
    return out


def first_pass(w: _Writer, m: Match, group: list[Value], fold: list[tuple[Value, str, str]]) -> None:
    """The first pass with the shifted sums of ``fold`` accumulated beside ``group``'s."""
    for r, a, _ in fold:
        w(f"float shift_{r.name} = 0.0f;")
        w.open("if (R > 0)")
        w("const int64_t c = 0;")
        w("const int64_t flat = rflat + c;")
        _emit_chain(w, m, [a])
        w(f"shift_{r.name} = {a};")
        w.close()
    # a sum of ``a`` itself is R K + S1: not accumulated twice
    shifted = {a: r.name for r, a, _ in fold}
    same = [r for r in group if r.reduce == "sum" and r.deps[0] in shifted]
    group = [r for r in group if r not in same]
    extra = []
    for r, _, _ in fold:
        extra += [Value(f"{r.name}_s1", "row", deps=(f"{r.name}_d",), reduce="sum"),
                  Value(f"{r.name}_s2", "row", deps=(f"{r.name}_q",), reduce="sum")]

    def both() -> None:
        w("const int64_t flat = rflat + c;")
        _emit_chain(w, m, [r.deps[0] for r in group] + [a for _, a, _ in fold])
        for r, a, _ in fold:
            w(f"const float {r.name}_d = {a} - shift_{r.name};")
            w(f"const float {r.name}_q = {r.name}_d * {r.name}_d;")

    reduce_pass(w, group + extra, both)
    for r in same:
        f = shifted[r.deps[0]]
        w(f"const float acc_{r.name} = (float)R * shift_{f} + acc_{f}_s1;")


def fold_values(w: _Writer, fold: list[tuple[Value, str, str]]) -> None:
    """Each folded reduction from its shifted sums, once the mean ``m`` is known."""
    for r, _, mean in fold:
        e = f"e_{r.name}"
        w(f"const float {e} = {mean} - shift_{r.name};")
        w(f"const float {r.name} = std::max(0.0f, acc_{r.name}_s2 - 2.0f * {e} * acc_{r.name}_s1"
          f" + (float)R * {e} * {e});")

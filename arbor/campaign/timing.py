"""Budgets that hold: how long the next step and the final verification are expected to take,
from this campaign's own past measurement durations.

The wall-clock budget used to be checked only between steps, so one step (or a final
verification after the budget was spent) could overrun it by a whole measurement or more. The
loop now starts a step only when the step *and* the final verification still fit: a step is
expected to take the median candidate's total measurement time (primary plus any re-measures or
confirmation) times the candidates proposed per step, and the verification the median single
measurement time for each measurement the believed best still lacks — counted by the
verification's own rule (``final_count.py``): a measurement whose reference drifted from the
baseline's latest does not count, so it is not assumed to. Before anything was measured there
is no estimate, and nothing is held back.

With several workers (``executor.workers``) a step returns as soon as its candidate is handed to a
worker, so "the step fits" says nothing about when the campaign ends. A candidate dispatched now
ends, if it wins, after its first measurement *and* its confirmation, and the final verification
starts only once every measurement in flight has landed. So a parallel dispatch must fit
``now + max(its own chain, what is still in flight) + verification``, and the chain is estimated
per kind of candidate: a compiled one (``torch.compile``, Triton, extensions) pays its compilation
in its first measurement — 30 s against 7 s eager on the quickstart, where two workers ran 255 s
against ``max_wall_s: 210`` — and far less in its later ones (the compile cache).
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict

from arbor.sandbox.kernel.compile_store import uses_compiler, uses_extension

from .context import Context
from .final_count import counted


def _durations(ctx: Context) -> tuple[list[float], list[float], dict[int, float]]:
    """(every measurement's duration, each candidate's total, each node's latest measurement) —
    candidates only when measured."""
    per_node: dict[int, float] = defaultdict(float)
    latest: dict[int, float] = {}
    single: list[float] = []
    root = ctx.campaign.root_node_id
    for m in ctx.store.measurements_after(ctx.cid, 0, limit=100_000, samples=False):
        d = float(m.duration_s or 0.0)
        if d <= 0:
            continue
        single.append(d)
        latest[m.node_id] = d
        if m.node_id != root and m.purpose != "final":
            per_node[m.node_id] += d
    return single, list(per_node.values()), latest


def expected(ctx: Context) -> dict[str, float]:
    """{'measurement_s', 'step_s', 'verify_s'} — zeros when there is no history yet.

    The final verification measures the believed best again, so once the best has been measured
    its own latest measurement prices each one: a candidate that builds a C++ extension in every
    measurement process (~30 s) costs several median measurements, and priced at the median the
    serial loop once ran 6 s past ``max_wall_s``."""
    single, per_candidate, latest = _durations(ctx)
    if not single:
        return {"measurement_s": 0.0, "step_s": 0.0, "verify_s": 0.0}
    one = statistics.median(single)
    candidate = statistics.median(per_candidate) if per_candidate else one
    step = candidate * ctx.spec.agents.proposals_per_step
    if ctx.step_walls:  # what a step really took here, agents and store included
        step = max(step, statistics.median(ctx.step_walls[-10:]))
    wanted = ctx.spec.critic.final_measurements
    best = ctx.index.best()
    unit = latest.get(best.id, one) if best is not None and best.parent_id is not None else one
    verify = unit * verify_lacks(ctx, wanted) if wanted >= 2 and ctx.target.verify_best else 0.0
    return {"measurement_s": one, "step_s": step, "verify_s": verify}


def measurement_s(ctx: Context, node_id: int) -> float:
    """What one more measurement of ``node_id`` is expected to take: its own latest, else the
    campaign's median."""
    single, _, latest = _durations(ctx)
    return latest.get(node_id, statistics.median(single) if single else 0.0)


def verify_lacks(ctx: Context, wanted: int) -> int:
    """Final measurements the believed best still needs (at least one: contenders are measured
    too, while they fit). Before any candidate is accepted, a future best is assumed to bring two
    that count (its first measurement and its confirmation)."""
    best = ctx.index.best()
    if best is None or best.parent_id is None:
        return max(1, wanted - 2)
    return max(1, wanted - counted(ctx, best.id))


def ahead_s(ctx: Context) -> float:
    """Seconds the next step plus the final verification are expected to take (with several
    workers: a dispatch's chain and what is in flight, ``dispatch_ahead_s``)."""
    return ctx.measurer.ahead_s(expected(ctx))


def eta_s(ctx: Context, elapsed_s: float, e: dict[str, float] | None = None) -> float | None:
    """Expected seconds until the campaign ends (budget of evaluations or of wall time, whichever
    comes first, plus the final verification); ``e``: ``expected(ctx)`` when the caller has it."""
    e = expected(ctx) if e is None else e
    if not e["step_s"]:
        return None
    b = ctx.spec.budget
    steps_left = max(0, b.max_evaluations - ctx.evaluations()) / max(1, ctx.spec.agents.proposals_per_step)
    return min(steps_left * e["step_s"] + e["verify_s"], max(0.0, b.max_wall_s - elapsed_s))


def mark_step(ctx: Context) -> None:
    """Called as each step starts: the previous step's wall time joins the estimate."""
    import time

    now = time.monotonic()
    if ctx.step_started is not None:
        ctx.step_walls.append(now - ctx.step_started)
    ctx.step_started = now


def time_left(ctx: Context) -> float:
    return ctx.spec.budget.max_wall_s - ctx.flush_elapsed()


KINDS = ("eager", "compiled", "extension")
_KIND_WORDS = {"eager": "new", "compiled": "compiled", "extension": "C++-extension"}
# What building a load_inline extension adds to a measurement until the campaign has measured one
# of its own (23-28 s on the development machine, nearly all of it torch/extension.h): borrowed
# from the other kinds alone, the first such candidate of a campaign was priced at 13 s a
# measurement, took 33, and ended l1_13's campaign at 283 s of 240.
EXTENSION_BUILD_S = 25.0


def kind_of_source(source: str) -> str:
    """'extension' (builds a C++ extension at import in its first measurement, ~25 s; later ones
    import it from the compile cache), 'compiled' (pays in its first
    measurement, loads from the compile cache in later ones) or 'eager'."""
    if uses_extension(source):
        return "extension"
    return "compiled" if uses_compiler(source) else "eager"


def _kind(ctx: Context, sha: str) -> str:
    try:
        return kind_of_source(ctx.source(sha))
    except Exception:  # noqa: BLE001 - an artifact that is not source (a replayed config)
        return "eager"


def _upper_quartile(xs: list[float]) -> float:
    s = sorted(xs)
    return s[(3 * len(s)) // 4] if s else 0.0


def by_kind(ctx: Context) -> dict[str, dict]:
    """Per kind of candidate ('compiled', 'eager', and 'any'): ``first``, the upper quartile of
    first-measurement seconds (a budget that must hold cannot count on the quicker half), and
    ``ratio``, a later measurement's (confirmation, tie-break, final) seconds over the same
    candidate's first: about 1 for eager candidates, well below for compiled ones that load from
    the compile cache. ``firsts`` maps each node to its first measurement's seconds. A kind with
    no history of its own borrows 'any'."""
    root = ctx.campaign.root_node_id
    firsts: dict[int, float] = {}
    later: dict[int, list[float]] = defaultdict(list)
    kind_of: dict[int, str] = {}
    for m in ctx.store.measurements_after(ctx.cid, 0, limit=100_000, samples=False):
        d = float(m.duration_s or 0.0)
        if d <= 0:
            continue
        if m.node_id not in kind_of:
            kind_of[m.node_id] = "eager" if m.node_id == root else _kind(ctx, m.artifact_sha)
        if m.attempt == 1:
            firsts[m.node_id] = d
        else:
            later[m.node_id].append(d)
    out: dict[str, dict] = {"firsts": firsts, "kind_of": kind_of}
    for kind in ("any", *KINDS):
        nodes = [n for n in firsts if kind == "any" or kind_of[n] == kind]
        ratios = [statistics.median(later[n]) / firsts[n] for n in nodes if later.get(n)]
        out[kind] = {"first": _upper_quartile([firsts[n] for n in nodes]),
                     "ratio": statistics.median(ratios) if ratios else None}
    for kind in KINDS:
        if not out[kind]["first"]:
            out[kind]["first"] = out["any"]["first"] + (EXTENSION_BUILD_S if kind == "extension" and out["any"]["first"] else 0.0)
        if out[kind]["ratio"] is None:  # an extension: later measurements at its first until one was measured
            out[kind]["ratio"] = 1.0 if kind == "extension" else (out["any"]["ratio"] if out["any"]["ratio"] is not None else 1.0)
    if out["any"]["ratio"] is None:
        out["any"]["ratio"] = 1.0
    return out


def chain_s(ctx: Context, kind: str, attempt: int, durations: dict, node_id: int | None = None) -> float:
    """Seconds from dispatching a measurement until its candidate needs no more: a first
    measurement may win and then needs its confirmation too; a later one is the last (its length
    from the candidate's own first measurement when there is one)."""
    d = durations[kind]
    first = durations["firsts"].get(node_id, d["first"]) if node_id is not None else d["first"]
    if attempt > 1:
        return first * d["ratio"]
    return first * (1.0 + (d["ratio"] if ctx.spec.critic.confirm_new_best else 0.0))


def looks_that_fit(ctx: Context, node_id: int) -> int | None:
    """Further measurements of one candidate (the Critic's sequential test of an undecided one)
    that fit before ``max_wall_s`` with the final verification still to come: each priced as a
    later measurement of this candidate. None before anything was measured."""
    d = by_kind(ctx)
    first = d["firsts"].get(node_id) or d["any"]["first"]
    if not first:
        return None
    kind = d["kind_of"].get(node_id, "any")
    per = first * d.get(kind, d["any"])["ratio"]
    left = ctx.spec.budget.max_wall_s - ctx.flush_elapsed() - expected(ctx)["verify_s"]
    return max(0, int(left // per)) if per > 0 else None


def dispatch_ahead_s(ctx: Context, source: str | None = None) -> float:
    """Parallel loop: seconds until the campaign could end if one more candidate (``source``,
    or the quicker kind when it is not known yet) is dispatched now — the longer of its chain and
    the chains still in flight, then the final verification. 0 without history."""
    durations = by_kind(ctx)
    if not durations["any"]["first"]:
        return 0.0
    # not known yet (the step's check, before anything is proposed): the kind that could still fit;
    # the dispatch itself checks the candidate's own kind (parallel.Parallel.defer_for_time)
    kinds = [kind_of_source(source)] if source is not None else list(KINDS)
    lag = ctx.measurer.lag_s()  # the loop's own share of each measurement
    steps = 2 if ctx.spec.critic.confirm_new_best else 1
    new = min(chain_s(ctx, k, 1, durations) for k in kinds)
    finals = min(durations[k]["first"] * durations[k]["ratio"] for k in kinds)
    now = time.monotonic()
    flying = 0.0
    for f in ctx.measurer.flying():
        kind = durations["kind_of"].get(f.node_id) or _kind(ctx, ctx.store.get_node(f.node_id).artifact_sha)
        n = steps if f.attempt == 1 else 1
        flying = max(flying, f.started + chain_s(ctx, kind, f.attempt, durations, f.node_id) + n * lag - now)
        finals = max(finals, durations["firsts"].get(f.node_id, durations[kind]["first"]) * durations[kind]["ratio"])
    wanted = ctx.spec.critic.final_measurements
    # the best's missing final measurement(s), as long as a later measurement of the slowest
    # candidate that may still become the best
    verify = finals * max(1, wanted - 2) if wanted >= 2 and ctx.target.verify_best else 0.0
    return max(new + steps * lag, flying) + (verify + lag if verify else 0.0)


def dispatch_fits(ctx: Context, source: str) -> str | None:
    """None when a candidate (``source``) dispatched now still lets the campaign end inside
    ``max_wall_s``; else the stop reason."""
    ahead = dispatch_ahead_s(ctx, source)
    used = ctx.flush_elapsed()
    if ahead and used + ahead > ctx.spec.budget.max_wall_s:
        return (f"budget: {used:.0f} s used; a {_KIND_WORDS[kind_of_source(source)]} candidate, "
                f"its confirmation, what is in flight and the final verification (~{ahead:.0f} s) would not "
                f"finish inside max_wall_s={ctx.spec.budget.max_wall_s:.0f}")
    return None

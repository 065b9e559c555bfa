"""Budgets that hold: how long the next step and the final verification are expected to take,
from this campaign's own past measurement durations.

The wall-clock budget used to be checked only between steps, so one step (or a final
verification after the budget was spent) could overrun it by a whole measurement or more. The
loop now starts a step only when the step *and* the final verification still fit: a step is
expected to take the median candidate's total measurement time (primary plus any re-measures or
confirmation) times the candidates proposed per step, and the verification the median single
measurement time for each measurement the best still lacks. Before anything was measured there
is no estimate, and nothing is held back.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from .context import Context


def _durations(ctx: Context) -> tuple[list[float], list[float]]:
    """(every measurement's duration, each candidate's total) — candidates only when measured."""
    per_node: dict[int, float] = defaultdict(float)
    single: list[float] = []
    root = ctx.campaign.root_node_id
    for m in ctx.store.measurements_after(ctx.cid, 0, limit=100_000, samples=False):
        d = float(m.duration_s or 0.0)
        if d <= 0:
            continue
        single.append(d)
        if m.node_id != root and m.purpose != "final":
            per_node[m.node_id] += d
    return single, list(per_node.values())


def expected(ctx: Context) -> dict[str, float]:
    """{'measurement_s', 'step_s', 'verify_s'} — zeros when there is no history yet."""
    single, per_candidate = _durations(ctx)
    if not single:
        return {"measurement_s": 0.0, "step_s": 0.0, "verify_s": 0.0}
    one = statistics.median(single)
    candidate = statistics.median(per_candidate) if per_candidate else one
    step = candidate * ctx.spec.agents.proposals_per_step
    if ctx.step_walls:  # what a step really took here, agents and store included
        step = max(step, statistics.median(ctx.step_walls[-10:]))
    wanted = ctx.spec.critic.final_measurements
    verify = one * max(1, wanted - 2) if wanted >= 2 and ctx.target.verify_best else 0.0
    return {"measurement_s": one, "step_s": step, "verify_s": verify}


def ahead_s(ctx: Context) -> float:
    """Seconds the next step plus the final verification are expected to take."""
    e = expected(ctx)
    return e["step_s"] + e["verify_s"]


def eta_s(ctx: Context, elapsed_s: float) -> float | None:
    """Expected seconds until the campaign ends (budget of evaluations or of wall time, whichever
    comes first, plus the final verification)."""
    e = expected(ctx)
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

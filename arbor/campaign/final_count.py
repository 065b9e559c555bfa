"""Which of a node's measurements the final verification counts, in one place.

``verify.py`` measures a node until ``critic.final_measurements`` of its measurements count;
``timing.py`` reserves wall time for the ones still missing before it lets a step start. They used
to disagree: timing assumed the best's first measurement and its confirmation always count (one
final measurement left of three), while verification drops any whose reference ran slower than
the baseline's latest allows. On the quickstart the best's three earlier measurements had their
reference at +16-22% (the machine was slower then; the probe said so and the Critic judged them on
their paired ratios), so verification took three measurements (21 s) where one (7 s) had been
reserved, and the campaign ended at 223 s against ``max_wall_s: 210``.
"""

from __future__ import annotations

import statistics

from arbor.agents.critic.env_gate import drift_tolerance, reference_drift
from arbor.search_tree.records import MeasurementRecord

from .context import Context

Rule = tuple[float | None, float]  # (the baseline's reference time, the drift tolerance)


def measurement_speedup(m: MeasurementRecord, reference_s: float | None = None,
                        tolerance: float = 0.0) -> float | None:
    """median(reference) / median(candidate) of one correct measurement (paired rounds); None when
    the reference ran slower than ``reference_s`` (the baseline's) allows: an inflated ratio."""
    if m.status != "ok" or not m.baseline_samples or not m.candidate_samples:
        return None
    b, c = statistics.median(m.baseline_samples), statistics.median(m.candidate_samples)
    if reference_drift(b, reference_s, tolerance):
        return None
    return b / c if c > 0 else None


def baseline_reference(ctx: Context) -> float | None:
    """The reference's median in the root's latest correct measurement (a fresh probe included)."""
    root = ctx.campaign.root_node_id
    ms = [m for m in ctx.store.measurements(root) if m.status == "ok" and m.baseline_samples] if root else []
    return statistics.median(ms[-1].baseline_samples) if ms else None


def rule(ctx: Context) -> Rule:
    """The same tolerance the Critic's ``reference`` gate uses."""
    return baseline_reference(ctx), drift_tolerance(ctx.noise_floor or 0.0, ctx.critic.config)


def ratio(ctx: Context, m: MeasurementRecord, ref: Rule = (None, 0.0)) -> float | None:
    """A kernel's median time ratio (None when its reference drifted); any other target's own
    ratio (serving: the paired SLO-throughput ratio, checked by the requests and accuracy gates)."""
    return measurement_speedup(m, *ref) if ctx.target.reports_times else ctx.target.final_ratio(m)


def counted(ctx: Context, node_id: int, ref: Rule | None = None) -> int:
    """How many of the node's measurements the final verification would count now."""
    ref = rule(ctx) if ref is None else ref
    return sum(1 for m in ctx.store.measurements(node_id) if ratio(ctx, m, ref) is not None)

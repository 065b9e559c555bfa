"""One speedup per node, and the times and interval that go with it.

A node's speedup is the Critic's value (``node.speedup``: history, tree, show, dashboard, export).
The campaign's best is reported with its verified (final) median when there is one. Whatever
number is reported, the times and the CI shown beside it come from ONE paired measurement whose
ratio is that number: a baseline time from the root's measurement and a best time from another
measurement read as a third, different ratio, and a CI taken from another measurement need not
even contain the estimate.
"""

from __future__ import annotations

import statistics

from arbor.agents.critic.stats import bootstrap_speedup_ci


def paired_estimate(store, node_id: int, speedup: float) -> tuple[float, float, tuple[float, float]] | None:  # type: ignore[no-untyped-def]
    """(reference median s, candidate median s, 95% CI) of the node's correct measurement whose
    paired ratio is closest to ``speedup``; None when the node has none. A measurement the Critic
    judged against the reference as it runs alone (its verdict's ``reference_tax``: the reference
    ran that much slower beside the candidate, twice) shows the reference's times divided by that
    factor, as the Critic judged them."""
    ms = [m for m in store.measurements(node_id)
          if m.status == "ok" and m.baseline_samples and m.candidate_samples]
    if not ms:
        return None
    taxes = {v.measurement_id: float(v.stats["reference_tax"]) for v in store.verdicts(node_id)
             if v.stats.get("reference_tax")}

    def reference(m) -> list[float]:  # type: ignore[no-untyped-def]
        tax = taxes.get(m.id, 1.0)
        return [b / tax for b in m.baseline_samples]

    def ratio(m) -> float:  # type: ignore[no-untyped-def]
        c = statistics.median(m.candidate_samples)
        return statistics.median(reference(m)) / c if c > 0 else float("inf")

    m = min(ms, key=lambda m: abs(ratio(m) - speedup))
    ref = reference(m)
    n = min(len(ref), len(m.candidate_samples))
    _, lo, hi = bootstrap_speedup_ci(ref[:n], m.candidate_samples[:n])
    return statistics.median(ref), statistics.median(m.candidate_samples), (lo, hi)


def times_clock(store, node_id: int | None) -> str | None:  # type: ignore[no-untyped-def]
    """The clock a node's displayed times are on ('cpu': the timing thread's CPU time, 'wall'),
    from its latest correct measurement; None when it has none or the harness did not say."""
    if node_id is None:
        return None
    ms = [m for m in store.measurements(node_id) if m.status == "ok"]
    return (ms[-1].stats or {}).get("clock") if ms else None


def paired_ratio_estimate(store, node_id: int, ratio: float) -> tuple[float, float] | None:  # type: ignore[no-untyped-def]
    """Serving: the 95% CI of the node's correct measurement whose paired per-round ratio (its
    ``stats["speedup"]``, higher is better) is closest to ``ratio``; None when it has none."""
    from arbor.agents.critic.serving_gates import paired_ratio_ci

    ms = [m for m in store.measurements(node_id) if m.status == "ok" and m.baseline_samples
          and m.candidate_samples and isinstance((m.stats or {}).get("speedup"), (int, float))]
    if not ms:
        return None
    m = min(ms, key=lambda m: abs(m.stats["speedup"] - ratio))
    _, lo, hi = paired_ratio_ci(m.baseline_samples, m.candidate_samples)
    return lo, hi

"""Throughput–latency Pareto fronts, hypervolume and the scalar serving objective.

A serving configuration is not one number: raising the batch size buys throughput with latency.
Each load level (a concurrency or a request rate) of a measurement gives one point
``(throughput, latency)`` where throughput is higher-is-better and latency lower-is-better.

Two views are derived from those points:

* **Scalar objective** — "max throughput with the p99 latency under the SLO" (vLLM auto_tune,
  AIPerf): the highest throughput among the load levels whose latency percentiles meet every
  SLO, with the point where the load curve crosses the SLO interpolated between levels
  (``interpolated_throughput_at_slo``) so it does not jump from level to level.
* **Hypervolume** — the area of the throughput × latency region the front dominates, bounded by a
  *reference point* ``(0 throughput, margin × the baseline's worst latency)``. The reference is
  taken from the baseline and held fixed, so two fronts measured against the same reference are
  comparable: a front that is better everywhere covers strictly more area.

**Pareto improvement %** = ``(HV(candidate) / HV(baseline) − 1) × 100`` with both hypervolumes
computed against the *same* baseline-derived reference point. 0 % means "no better anywhere",
+100 % means the candidate's front dominates twice the area of the baseline's.

Pure functions, no dependencies beyond the standard library, so the Critic and the reports
compute identical numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

DEFAULT_LATENCY_MARGIN = 1.5


@dataclass(frozen=True)
class Point:
    """One load level's outcome: ``throughput`` (higher is better), ``latency`` (lower is better)."""

    throughput: float
    latency: float
    label: str = ""

    def as_list(self) -> list:
        return [self.throughput, self.latency, self.label]


def dominates(a: Point, b: Point) -> bool:
    """``a`` is at least as good on both axes and strictly better on one."""
    return (a.throughput >= b.throughput and a.latency <= b.latency
            and (a.throughput > b.throughput or a.latency < b.latency))


def pareto_front(points: Iterable[Point]) -> list[Point]:
    """Non-dominated points, sorted by latency ascending (throughput then ascends too).

    Points with a non-finite or negative coordinate are dropped: a level that produced nothing
    cannot be on a front. Exact duplicates keep their first occurrence.
    """
    pts = [p for p in points if _finite(p.throughput) and _finite(p.latency)
           and p.throughput >= 0 and p.latency >= 0]
    pts.sort(key=lambda p: (p.latency, -p.throughput))
    front: list[Point] = []
    best_tput = float("-inf")
    for p in pts:
        if p.throughput > best_tput:
            front.append(p)
            best_tput = p.throughput
    return front


def reference_point(baseline_points: Sequence[Point], margin: float = DEFAULT_LATENCY_MARGIN) -> Point:
    """The fixed hypervolume reference derived from the baseline: zero throughput and ``margin``
    times the baseline's worst latency, so every baseline point dominates some area."""
    lats = [p.latency for p in baseline_points if _finite(p.latency) and p.latency > 0]
    if not lats:
        raise ValueError("the baseline has no point with a positive, finite latency")
    if margin <= 1.0:
        raise ValueError("margin must be > 1 so the baseline's worst point still counts")
    return Point(0.0, margin * max(lats), "reference")


def hypervolume(points: Iterable[Point], ref: Point) -> float:
    """Area dominated by ``points`` and bounded by ``ref`` (throughput ≥ ref, latency ≤ ref).

    Sweep over the front in latency order: between two consecutive front latencies the
    dominated throughput is that of the earlier (lower-latency) point.
    """
    front = [p for p in pareto_front(points) if p.latency < ref.latency and p.throughput > ref.throughput]
    area = 0.0
    for i, p in enumerate(front):
        next_lat = front[i + 1].latency if i + 1 < len(front) else ref.latency
        area += (next_lat - p.latency) * (p.throughput - ref.throughput)
    return area


def pareto_improvement_pct(hv_candidate: float, hv_baseline: float) -> float:
    """``(HV_c / HV_b − 1) × 100`` — both against the same baseline-derived reference point."""
    if hv_baseline <= 0:
        return float("inf") if hv_candidate > 0 else 0.0
    return (hv_candidate / hv_baseline - 1.0) * 100.0


def throughput_at_slo(levels: Iterable[tuple[float, bool]]) -> float:
    """Max throughput among levels that meet the SLO (0 if none does).

    ``levels`` are ``(throughput, meets_slo)`` pairs, one per load level.
    """
    ok = [t for t, meets in levels if meets and _finite(t)]
    return max(ok) if ok else 0.0


def interpolated_throughput_at_slo(curve: Sequence[tuple[float, Sequence[tuple[float, float]]]]) -> float:
    """The scalar objective, "max throughput with the latency percentiles under the SLO", made
    continuous.

    ``curve`` lists the load levels in increasing load order, each as ``(throughput,
    [(latency, limit), ...])`` — one pair per SLO metric (TTFT, TPOT, E2E at the SLO percentile).
    The result is the larger of (a) the best throughput among levels that meet every limit and
    (b) the throughput where the load curve first crosses a limit, interpolated linearly between
    the last level that meets every limit and the first that does not (from the zero-load point
    ``(0 req/s, 0 ms)`` when already the first level misses).

    Why interpolate: with a handful of load levels, "the best level under the SLO" jumps from one
    level to the next when a p99 wobbles around the limit, which makes the objective of one
    configuration swing by the gap between two levels from round to round. The crossing point
    moves smoothly with the latencies, so the Critic sees the real run-to-run noise.
    """
    best_met = 0.0
    prev_t, prev_lat = 0.0, None
    crossing = None
    for t, metrics in curve:
        if not _finite(t):
            continue
        violated = [(lat, lim) for lat, lim in metrics if lat is None or not _finite(lat) or lat > lim]
        if not violated:
            best_met = max(best_met, t)
        elif crossing is None:
            fracs = []
            for i, (lat, lim) in enumerate(metrics):
                if (lat, lim) not in violated:
                    continue
                if lat is None or not _finite(lat):
                    fracs.append(0.0)
                    continue
                p = prev_lat[i] if prev_lat is not None else 0.0
                fracs.append(max(0.0, min(1.0, (lim - p) / (lat - p))) if lat > p else 0.0)
            crossing = prev_t + min(fracs) * (t - prev_t)
        if not violated and crossing is None:
            prev_t, prev_lat = t, [lat for lat, _ in metrics]
    return max(best_met, crossing or 0.0)


def _finite(x: float) -> bool:
    return x == x and x not in (float("inf"), float("-inf"))

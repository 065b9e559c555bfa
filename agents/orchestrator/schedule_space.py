"""Going on into a generated kernel's schedule space once the fixed moves are spent.

A generated kernel (``cpp_codegen``, ``triton_codegen``) is one point of a space of schedules
(``transforms/cpp/schedule.py``): on ReLU, softmax, GELU and layer norm the single default point
lost to ATen, the fixed moves were spent after 3-4 candidates, and campaigns stopped "exhausted"
at 70-106 s of 240 while the speed of light said 2.5-5x was left. When nothing else is left to
expand and more than ``MIN_LEFT`` is left, the Orchestrator expands the schedule space of the
best node, or else of the most promising rejected generated candidate (a point of a rejected
kernel may still win: the kernel lost at its default schedule, not at every one).

The points are ranked before they are offered: by the bottleneck (``BOUND_FIT``: a memory-bound
problem wants streaming stores and prefetches first, a compute-bound one the unroller), and by
what was measured at neighbouring points (``neighbour_factor``: a point one knob away from a
point that gained is raised, from one that lost, lowered). The family posterior still prunes
them: an option the outcome index ruled out is never offered (``HeuristicSpecialist.options``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

from arbor.agents.contracts import Option, Selection, Specialist
from arbor.agents.priors import OutcomeIndex
from arbor.search_tree.index import TreeIndex
from arbor.search_tree.records import NodeRecord

SCHEDULE_TRANSFORMS = frozenset({"cpp_schedule", "triton_schedule"})
MIN_LEFT = 1.3  # below this much headroom to the speed of light, a schedule search is not worth its builds
# measured diagnoses after which a rejected candidate's schedule is worth refining (it ran, correctly)
REFINABLE = frozenset({"no_gain", "regression", "unstable", "not_significant"})
# knobs that act on memory traffic and on the instruction stream: what each bound rewards
MEMORY_KNOBS = frozenset({"block", "stream", "prefetch", "onepass"})
COMPUTE_KNOBS = frozenset({"unroll", "lanes", "erf", "num_warps", "num_stages"})
OFF_BOUND = 0.6
NEIGHBOUR_RANGE = (0.5, 1.5)
# The most a schedule point is expected to gain over its kernel's default schedule: a rejected
# candidate further below the best than this is not refined (ReLU by hand: streaming stores 1.51-1.93x
# torch where the default omp simd loop ran 1.29-1.32x, about 1.5x between two schedules).
SCHEDULE_REACH = 2.0


@dataclass(frozen=True)
class Headroom:
    """What the speed of light says is left for the best (``left``: 1 / its fraction; None
    unknown) and which bound binds (memory | compute | None)."""

    left: float | None
    bound: str | None = None


def is_schedule(option: Option) -> bool:
    return option.move.transform in SCHEDULE_TRANSFORMS


def bound_fit(params: dict, bound: str | None) -> float:
    """How well a point's knobs fit the binding bound: 1 on it, ``OFF_BOUND`` when every knob
    it changes acts on the other one."""
    changed = {k for k, v in params.items() if v}
    if bound is None or not changed:
        return 1.0
    on = MEMORY_KNOBS if bound == "memory" else COMPUTE_KNOBS
    return 1.0 if changed & on else OFF_BOUND


def neighbour_factor(params: dict, measured: list[tuple[dict, float]]) -> float:
    """The geometric mean of the gains (speedup over the parent) measured at points one knob
    away from ``params``, clamped to ``NEIGHBOUR_RANGE``; 1 with no such neighbour."""
    keys = set(params)
    gains = []
    for other, gain in measured:
        ks = keys | set(other)
        if sum(1 for k in ks if params.get(k, 0) != other.get(k, 0)) == 1 and gain > 0:
            gains.append(math.log(gain))
    if not gains:
        return 1.0
    lo, hi = NEIGHBOUR_RANGE
    return min(hi, max(lo, math.exp(sum(gains) / len(gains))))


def measured_points(seen: dict[int, NodeRecord], moves: dict[str, dict]) -> list[tuple[dict, float]]:
    """Every measured schedule point among the finished nodes ``seen``: (its params, its speedup
    over its parent; the baseline counts 1)."""
    out = []
    for n in seen.values():
        params = moves.get(n.move_id or "")
        if params is None or n.speedup is None or n.parent_id is None:
            continue
        parent = seen.get(n.parent_id)
        base = parent.speedup if parent is not None and parent.speedup else 1.0
        out.append((params, n.speedup / base))
    return out


def worth_keeping(n: NodeRecord, schedule_moves: set[str]) -> bool:
    """Whether the Orchestrator keeps a finished node for this search (the tree index keeps only
    accepted ones): a candidate that ran correctly, or any measured schedule point."""
    if n.parent_id is None or n.speedup is None:
        return False
    return n.state == "accepted" or (n.move_id or "") in schedule_moves or (
        n.state == "rejected" and (n.diagnosis or "no_gain") in REFINABLE)


def rank(options: list[Option], headroom: Headroom, measured: list[tuple[dict, float]]) -> list[Option]:
    """Schedule options re-weighted by the bound and their measured neighbours, best first."""
    ranked = []
    for o in options:
        f = bound_fit(o.move.params, headroom.bound) * neighbour_factor(o.move.params, measured)
        if f != 1.0 and o.trace is not None and o.prior > 0:
            o.trace.scale(f"schedule point ranked by the {headroom.bound or 'unknown'} bound and its measured "
                          "neighbours", f)
        ranked.append(replace(o, prior=min(1.0, o.prior * f)))
    ranked.sort(key=lambda o: -o.prior)
    return ranked


def candidates(index: TreeIndex, seen: dict[int, NodeRecord]) -> list[NodeRecord]:
    """Where a schedule search may start, in order: the best accepted node, then rejected
    candidates that ran correctly and that a schedule could take past the best (within
    ``SCHEDULE_REACH`` of it), fastest first."""
    best = index.best()
    floor = index.best_speedup() / SCHEDULE_REACH
    rejected = [n for n in seen.values() if n.state == "rejected" and (n.diagnosis or "no_gain") in REFINABLE
                and (n.speedup or 0.0) >= floor]
    rejected.sort(key=lambda n: (-(n.speedup or 0.0), n.id))
    return ([best] if best is not None else []) + rejected


def schedule_moves(specialist: Specialist) -> dict[str, dict]:
    """The specialist's schedule moves: id -> params."""
    return {m.id: dict(m.params) for m in getattr(specialist, "moves", []) if m.transform in SCHEDULE_TRANSFORMS}


def select(index: TreeIndex, specialist: Specialist, outcomes: OutcomeIndex, source_of: Callable[[str], str],
           is_known: Callable[[str], bool], headroom: Headroom,
           seen: dict[int, NodeRecord]) -> tuple[Selection | None, str]:
    """(the node whose schedule space to expand with its ranked points, or None; why, in numbers).
    ``seen``: the finished nodes worth keeping (``worth_keeping``), by id."""
    if headroom.left is not None and headroom.left <= MIN_LEFT:
        return None, (f"at most {headroom.left:.2f}x left to the speed of light ({headroom.bound or 'unknown'} "
                      f"bound), not above {MIN_LEFT}x: no schedule search")
    moves = schedule_moves(specialist)
    if not moves:
        return None, "no schedule moves are loaded (skills cpp-schedule / triton-schedule)"
    measured = measured_points(seen, moves)
    looked = 0
    for node in candidates(index, seen):
        row = index.row_of.get(node.id)
        tried = index.tried.get(row, set()) if row is not None else set()
        options = [o for o in specialist.options(node, source_of(node.artifact_sha), tried, is_known, outcomes)
                   if is_schedule(o)]
        looked += 1
        if options:
            left = f"{headroom.left:.2f}x" if headroom.left is not None else "unknown headroom"
            what = "the best node" if node is index.best() else f"rejected {node.move_id} ({node.speedup:.3f}x)"
            note = (f"schedule space of {what}, node {node.id}: fixed moves spent, {left} left to the speed of "
                    f"light; {len(options)} points, {len(measured)} measured so far")
            return Selection(node, rank(options, headroom, measured), note), note
    return None, (f"no untried schedule point on {looked} candidate node(s) within {SCHEDULE_REACH:g}x of the best "
                  f"({len(measured)} points measured)")

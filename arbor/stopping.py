"""Stop conditions, each recorded as the campaign's stop reason (DESIGN §9)."""

from __future__ import annotations

from arbor.search_tree.records import NodeRecord
from arbor.spec import Budget

FAILED_DIAGNOSES = {"compile_error", "runtime_error", "timeout", "oom", "harness_error", "hack_suspected"}


def stop_reason(budget: Budget, nodes: list[NodeRecord], evals: int, elapsed_s: float,
                best_speedup: float) -> str | None:
    """``evals`` counts candidates measured at least once (re-measurements and confirmations
    finish a candidate already started and do not count against max_evaluations)."""
    root = next((n for n in nodes if n.parent_id is None), None)
    if root is not None and root.state in ("rejected", "failed"):
        fix = ("quiet the machine or raise critic.max_cv" if root.diagnosis == "unstable"
               else "check that the problem runs on its own")
        return f"baseline {root.diagnosis}: {root.reason} — {fix}"
    if evals >= budget.max_evaluations:
        return f"budget: {evals} evaluations (max_evaluations={budget.max_evaluations})"
    if elapsed_s >= budget.max_wall_s:
        return f"budget: {elapsed_s:.0f} s wall clock (max_wall_s={budget.max_wall_s:.0f})"
    if budget.target_speedup is not None and best_speedup >= budget.target_speedup:
        return f"target reached: {best_speedup:.3f}x >= {budget.target_speedup}x"
    finished = [n for n in nodes if n.parent_id is not None and n.finished_at is not None]
    finished.sort(key=lambda n: n.finished_at)
    if budget.patience is not None and finished:
        last_win = max((i for i, n in enumerate(finished) if n.state == "accepted"), default=-1)
        since = len(finished) - 1 - last_win
        if since >= budget.patience:
            return f"patience: {since} candidates without a new accepted result"
    tail = finished[-budget.max_failures_in_row:]
    if len(tail) == budget.max_failures_in_row and all(n.diagnosis in FAILED_DIAGNOSES for n in tail):
        return f"crash storm: the last {len(tail)} candidates all failed"
    return None

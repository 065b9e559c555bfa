"""Stop conditions, each recorded as the campaign's stop reason (docs/architecture.md#stopping)."""

from __future__ import annotations

from arbor.search_tree.index import TreeIndex
from arbor.spec import Budget

from .speed_of_light import Position

FAILED_DIAGNOSES = {"compile_error", "runtime_error", "timeout", "oom", "harness_error", "hack_suspected",
                    "startup_failed"}


def stop_reason(budget: Budget, index: TreeIndex, evals: int, elapsed_s: float, ahead_s: float = 0.0,
                sol: Position | None = None) -> str | None:
    """``evals`` counts candidates measured at least once (re-measurements and confirmations
    finish a candidate already started and do not count against max_evaluations). ``ahead_s``:
    what the next step and the final verification are expected to take (``timing.py``); a step
    that would not finish inside ``max_wall_s`` is not started. ``sol``: the campaign's
    speed-of-light position (``speed_of_light.py``), for ``sol_margin``."""
    root = index.root()
    if root is not None and root.state in ("rejected", "failed"):
        fix = ("quiet the machine or raise critic.max_cv" if root.diagnosis == "unstable"
               else "check that the problem runs on its own")
        return f"baseline {root.diagnosis}: {root.reason} — {fix}"
    if evals >= budget.max_evaluations:
        return f"budget: {evals} evaluations (max_evaluations={budget.max_evaluations})"
    if elapsed_s >= budget.max_wall_s:
        return f"budget: {elapsed_s:.0f} s wall clock (max_wall_s={budget.max_wall_s:.0f})"
    if ahead_s and elapsed_s + ahead_s > budget.max_wall_s:
        return (f"budget: {elapsed_s:.0f} s used; the next step and the final verification (~{ahead_s:.0f} s) "
                f"would not finish inside max_wall_s={budget.max_wall_s:.0f}")
    best = index.best_speedup()
    if budget.target_speedup is not None and best >= budget.target_speedup:
        return f"target reached: {best:.3f}x >= {budget.target_speedup}x"
    near = sol_stop_reason(budget, sol, best, root)
    if near is not None:
        return near
    if budget.patience is not None and index.since_last_win >= budget.patience:
        return f"patience: {index.since_last_win} candidates without a new accepted result"
    tail = list(index.recent_finished)[-budget.max_failures_in_row:]
    if len(tail) == budget.max_failures_in_row and all(d in FAILED_DIAGNOSES for _, d in tail):
        return f"crash storm: the last {len(tail)} candidates all failed"
    return None


def sol_stop_reason(budget: Budget, sol: Position | None, best: float, root) -> str | None:  # type: ignore[no-untyped-def]
    """The best runs within ``sol_margin`` of its speed of light: whatever is left to try here can
    gain at most 1/fraction, so the campaign stops and says what would open more headroom. Only a
    memory-bound position stops a campaign (no honest candidate moves fewer bytes than its inputs
    and outputs; a compute-bound reference can still be collapsed by algebra into fewer FLOPs), and
    a reading the position flags as impossible (a bug) never does."""
    if budget.sol_margin is None or sol is None or sol.reference_s is None or root is None \
            or root.state != "accepted" or sol.bound != "memory":
        return None
    t = sol.reference_s / max(best, 1e-12)
    shown, note = sol.reading(t)
    if shown is None or note or shown < 1.0 - budget.sol_margin:
        return None
    who = "the reference" if best <= 1.0 else f"the best ({best:.3f}x)"
    return (f"speed of light: {who} runs at {shown:.0%} of its speed of light ({sol.describe()}), within "
            f"budget.sol_margin={budget.sol_margin:g}: at most {1 / shown:.2f}x is left at these settings — more "
            f"needs {sol.advice()}; lower sol_margin (or remove it) to search anyway")


def llm_stop_reason(llm) -> str | None:
    """LLM agents' stop conditions (``llm`` is the campaign's LLMRuntime, None without LLM roles):
    the token or cost budget is spent, or an LLM agent got no usable answer N calls in a row.
    Both stop between steps, so nothing measured is lost and raising the budget (or fixing the
    endpoint) and running again resumes the campaign."""
    if llm is None:
        return None
    st = llm.state()
    if st.usage.exhausted:
        return st.usage.exhausted
    if st.failures_in_row >= st.max_failures_in_row:
        last = (st.last_failure or "")[:300]
        return (f"LLM unavailable: {st.failures_in_row} calls in a row got no usable answer (last: {last}) — "
                "check the endpoint (agents.base_url, model, key), then run again to resume")
    return None


def headroom(sol: Position | None, best: float) -> tuple[float | None, str | None]:
    """(what the speed of light says is left for the best: 1 / its fraction, None when unknown;
    the bound that binds). Read through ``Position.reading``, the figure the summaries show."""
    if sol is None or sol.reference_s is None:
        return None, None
    shown, note = sol.reading(sol.reference_s / max(best, 1e-12))
    if shown is None or (note or "").startswith("BUG") or shown <= 0:
        return None, sol.bound
    return 1.0 / shown, sol.bound


def exhausted_reason(budget: Budget, elapsed_s: float, evals: int, left: float | None, why_not: str,
                     ruled_out: str = "") -> str:
    """The stop when no move is left anywhere, in numbers: the budget left, the headroom the speed
    of light shows, why the schedule space was not searched, and what would search further."""
    wall = f"{elapsed_s:.0f} s of max_wall_s={budget.max_wall_s:.0f} ({1 - elapsed_s / budget.max_wall_s:.0%} left)"
    room = f"{left:.2f}x left to the speed of light" if left is not None else "the speed of light unknown"
    return (f"exhausted: no untried move left on any accepted node{ruled_out}, after {evals} of "
            f"max_evaluations={budget.max_evaluations} candidates at {wall}; {room}; {why_not} — to search further "
            "add moves (a skill in skills.extra_dirs) or run the llm backend")

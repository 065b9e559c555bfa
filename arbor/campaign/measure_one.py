"""One measurement in this process (the serial loop, and the final verification's baseline
probes with or without workers): taken with the owner's leases kept fresh, and landed so that a
finished measurement is never lost."""

from __future__ import annotations

import statistics
import threading
from typing import Callable

from arbor.search_tree.records import NodeRecord

from . import compile_times, store_retry, timing
from .context import Context

# (node, attempt) -> the measurement's result, or None when no worker could take it
Measure = Callable[[NodeRecord, int], "dict | None"]


def reprobe_reference(ctx: Context, measure: Measure | None = None) -> bool:
    """Measure the baseline again, in a fresh sandbox with no candidate's code, before a candidate
    whose reference ran slow (``env_drift``) is measured again. The env gate compares a
    measurement's reference with the baseline's latest one: when the machine itself slowed (a
    neighbour started after the baseline; memory-bound problems feel it most) the fresh baseline
    is slow too and the candidate is judged on its paired ratio, which the slowdown does not bias;
    when the candidate slowed its own process's reference, the fresh baseline is fast and the
    candidate is rejected as before. Without it, a load that changes after the baseline rejects
    every later candidate (seen on the generalization suite: nine of nine, +71-78%).

    ``measure``: how to take it (the final verification's workers); by default here. Returns
    whether a measurement was recorded."""
    root_id = ctx.campaign.root_node_id
    if root_id is None:
        return False
    root = ctx.store.get_node(root_id)
    ms = ctx.store.measurements(root_id)
    before = [m for m in ms if m.status == "ok" and m.baseline_samples]
    attempt = max((m.attempt for m in ms), default=0) + 1
    ctx.report("measuring", {"node": root, "attempt": attempt, "purpose": "reference"})
    result = measure(root, attempt) if measure is not None else measure_beating(ctx, root.artifact_sha)
    if result is None:
        return False
    record(ctx, root_id, attempt, "reference", result)
    note_reprobe(ctx, attempt, before, result)
    return True


def note_reprobe(ctx: Context, attempt: int, before: list, result: dict, **extra: object) -> None:
    """The ``reference_reprobe`` event of a recorded probe: the reference's median before (the
    baseline's latest correct measurement in ``before``) and in the probe (the Critic's
    ``_fresh_probe`` and the reports read it)."""
    old = statistics.median(before[-1].baseline_samples) if before else None
    fresh = result.get("baseline_samples") if result.get("status") == "ok" else None
    ctx.store.append_event(ctx.cid, "reference_reprobe",
                           {"attempt": attempt, "before_s": old, "after_s": statistics.median(fresh) if fresh else None,
                            **extra}, node_id=ctx.campaign.root_node_id, agent="loop")


def record(ctx: Context, nid: int, attempt: int, purpose: str, result: dict) -> None:
    """Land the measurement: retried through a full disk or a lost server, spilled to a file
    for the next run if the store keeps refusing (a finished measurement is never lost)."""
    try:
        store_retry.retry(lambda: ctx.store.record_measurement(nid, attempt, purpose, result, ctx.runner.name),
                          ctx.report, f"measurement of node {nid}")
    except BaseException:  # a SIGTERM during the retries too: the next run lands it
        store_retry.spill(ctx.spec.runs_dir(), nid, attempt, purpose, result, ctx.runner.name)
        raise
    store_retry.drop_spilled(ctx.spec.runs_dir(), nid, attempt)
    compile_times.note(ctx, nid, attempt, purpose, result)


# The least a measurement job is given when the wall budget is nearly spent (the loop starts none it
# expects not to fit; this bounds an unexpected one's overrun).
MIN_JOB_S = 30.0


def job_limit_s(ctx: Context) -> float:
    """A measurement job's time limit: what is left of ``max_wall_s`` (at least ``MIN_JOB_S``), so a
    job cannot run the campaign past its budget by the sandbox's whole limit. Found in the
    single-op benchmark: a cpp-fused softmax's extension build took 299 s under load 16, killed
    at the suite's 300 s sandbox limit, and the campaign stopped at 347 s of max_wall_s=150."""
    return max(MIN_JOB_S, timing.time_left(ctx))


def measure_beating(ctx: Context, artifact_sha: str) -> dict:
    """One measurement of the artifact, the owner's leases kept fresh while it runs."""
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(ctx, stop), daemon=True)
    beat.start()
    try:
        return ctx.target.measure(ctx.runner, ctx.source(artifact_sha), job_limit_s(ctx))
    finally:
        stop.set()
        beat.join()


def _heartbeat(ctx: Context, stop: threading.Event) -> None:
    while not stop.wait(ctx.heartbeat_s):
        try:
            ctx.store.heartbeat(ctx.owner)
        except Exception:  # a missed beat only makes the lease look stale sooner
            pass

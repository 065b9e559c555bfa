"""What the parallel measurer (``parallel.Parallel``) hands to its workers and how its two steps
run: the ``measure`` step (submit what fits, wait only when nothing can be submitted) and the final
verification's measurements on every worker at once. The worker tasks are module-level, so Ray can
ship them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .context import Context

if TYPE_CHECKING:
    from .parallel import Parallel


def measure_task(ctx: Context, source: str):
    """What a worker runs: the target adapter decides (a replay draws here, in this process)."""
    return ctx.target.worker_task(source)


def reprobe_then(reference_task, task, runner) -> dict:  # type: ignore[no-untyped-def]
    """The baseline measured again in a fresh sandbox, then the candidate, on one worker: the
    serial loop's order before a re-measurement the ``reference`` gate asked for
    (``steps.reprobe_reference``). Module-level, so Ray can ship it."""
    reference = reference_task(runner)
    result = task(runner)
    return {"reference": reference, "result": result,
            "duration_s": float(reference.get("duration_s") or 0.0) + float(result.get("duration_s") or 0.0)}


def measure(par: Parallel, state: dict) -> dict:
    """Submit every queued node of this step; wait only when no worker is free or nothing new was
    submitted (so the loop never spins); return the nodes whose measurement just ended."""
    ctx = par.ctx
    submitted = 0
    for nid in state.get("node_ids", []):
        if nid in par.flights or ctx.store.get_node(nid).state != "queued":
            continue
        if par.executor.free_slots() <= 0:
            break  # stays queued: select hands it back once a worker frees up
        if nid in par.deferred or par.defer_for_time(nid):
            continue  # would end after max_wall_s: left queued for a later run
        par.submit(nid)
        submitted += 1
    # measured nodes a dead run left go on to the Critic; queued ones that found no free worker
    # bring the graph back here (critique → measure), which then waits for a worker
    ids = [nid for nid in state.get("node_ids", []) if nid not in par.flights and nid not in par.deferred]
    ready = any(ctx.store.get_node(nid).state == "measured" for nid in ids)  # the Critic need not wait
    if par.flights and not ready and (par.executor.free_slots() <= 0 or submitted == 0):
        for done in par.executor.collect():
            nid = par.record(done)
            if nid is not None and nid not in ids:
                ids.append(nid)
    return {"node_ids": ids}


def verify_measure(par: Parallel, jobs: list[tuple[int, int]], report: bool = True) -> dict[tuple[int, int], dict]:
    """Final verification's measurements — (node id, attempt) pairs — on every worker at once
    (``report``: False when the caller names the measurement itself, a baseline probe)."""
    ctx = par.ctx
    tasks = []
    for nid, attempt in jobs:
        node = ctx.store.get_node(nid)
        if report:
            ctx.report("measuring", {"node": node, "attempt": attempt, "purpose": "final"})
        tasks.append(((nid, attempt), measure_task(ctx, ctx.source(node.artifact_sha))))
    out: dict[tuple[int, int], dict] = {}
    for _ in range(2):  # a lost worker's task runs once more; lost twice, it is left out
        for done in par.executor.map(tasks):
            if done.exception is not None:
                raise done.exception
            if done.lost is None:
                out[done.key] = done.result
        tasks = [(k, t) for k, t in tasks if k not in out]
    return out

"""Several measurements in flight: the campaign loop's side of ``executor.workers > 1``.

The graph is the serial one (select → propose → guard → measure → critique → update); only
``measure`` changes. It hands every queued node to a free worker and returns at once while a
worker is free, so ``select``/``propose``/``guard`` fill the next slot; when every worker is busy
(or nothing new can be proposed) it waits for the first measurement to end, records it, and passes
the finished nodes on to ``critique``. This process stays the only writer: workers return data.

What keeps parallel selection honest lives in the tree, not here: a node in flight already counts
as a visit below its parent and its move as tried there (``TreeIndex.apply`` counts a node when it
is proposed), and the index adds a virtual loss per pending descendant, so the next slot is filled
from elsewhere unless this parent is clearly best; content-addressed artifacts make proposing the
same candidate twice impossible.

A worker that dies mid-measurement produced nothing: its node goes back to the queue through its
lease (``running → queued``) and is measured by the next free worker — once. If the same node
loses a worker a second time it is recorded as a failed measurement (``worker_lost``) instead, so
one poisonous candidate cannot kill a fleet one actor at a time.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import replace
from typing import Iterable
from functools import partial

from arbor.spec_runners import executor_for
from arbor.sandbox.executors import Done, Executor

from . import compile_times, measure_one, timing
from .context import Context
from .measurer import Flight, Measurer
from .profiling import profiling_on
from .purposes import next_purpose, reference_drifted
from .parallel_steps import measure, measure_task, reprobe_then, verify_measure
from .serial import SerialMeasurer

SPECULATE = True  # expand a new best while its confirmation runs (see Parallel.judged)
EXPAND_IN_FLIGHT = True  # expand nodes before their first verdict, discounted (TreeIndex.speculative)
EARLY_START = True  # measure the baseline's children while it is measured (Parallel.early_start)
VERIFY_AHEAD = True  # idle workers in the drain take the best's final measurements (verify.verify_ahead)
DIVERSE_PICKS = True  # the believed best keeps half the workers on its children (Parallel.focus_row)


def open_executor(ctx: Context) -> Executor | None:
    """The campaign's executor, or None for the serial loop (one local worker); a module-level
    name so a benchmark's virtual clock can stand in for it."""
    return executor_for(ctx.spec, uses_device=ctx.target.uses_device)


def open_measurer(ctx: Context) -> Measurer:
    """The measurer ``spec.executor`` asks for: ``Parallel`` on an executor, else the serial one."""
    executor = open_executor(ctx)
    if executor is None:
        return SerialMeasurer(ctx)
    ctx.store.append_event(ctx.cid, "executor", {"kind": executor.kind, "workers": executor.workers,
                                                 "describe": executor.describe()}, agent="loop")
    ctx.report("sandbox_info", {"text": executor.describe()})
    return Parallel(ctx, executor)


def close_measurer(ctx: Context, wait: bool = True) -> None:
    """Close the campaign's measurer (its workers), leaving a serial one in its place."""
    m, ctx.measurer = ctx.measurer, SerialMeasurer(ctx)
    m.close(wait=wait)


class Parallel(Measurer):
    """The executor plus what this process knows about the measurements it has in flight."""

    def __init__(self, ctx: Context, executor: Executor):
        self.ctx, self.executor = ctx, executor
        self.flights: dict[int, Flight] = {}
        self.confirming: dict[int, float] = {}  # node -> first measured speedup, while it is confirmed
        self.speculate = SPECULATE
        self.held: set[int] = set()  # measured before the baseline was judged: judged right after it
        # candidates left queued because their measurement would not end inside max_wall_s: the next
        # run (a larger budget) measures them; their reason stops this one (steps.select)
        self.deferred: dict[int, str] = {}
        # candidate -> key of the baseline measurement taken beside its re-measurement: the Critic
        # judges the candidate once that has landed (see ``submit``)
        self.reference_for: dict[int, tuple] = {}
        self.lags: list[float] = []  # per finished measurement: seconds beyond its own duration until recorded
        self.gaps: list[float] = []  # seconds from recording a measurement to dispatching the same node's next
        self._recorded_at: dict[int, float] = {}
        ctx.index.keep_pending = EXPAND_IN_FLIGHT
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, daemon=True, name="arbor-heartbeat")
        self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.ctx.heartbeat_s):
            try:
                self.ctx.store.heartbeat(self.ctx.owner)
            except Exception:  # a missed beat only makes the leases look stale sooner
                pass

    def evidence(self, node_id: int, ev):  # type: ignore[no-untyped-def]
        """With several workers, results arrive while earlier wins still await their confirmation;
        a first measurement is a "new best" only if it also beats those, or every sibling that
        finishes together asks for a confirmation the serial loop would never have spent."""
        others = [v for k, v in self.confirming.items() if k != node_id]
        if ev.purpose != "primary" or not others or max(others) <= ev.best_speedup:
            return ev
        return replace(ev, best_speedup=max(others))

    def judged(self, node_id: int, j) -> None:  # type: ignore[no-untyped-def]
        """A first measurement that is a new best may be built on while it is confirmed: waiting
        for the confirmation would leave the tree's best branch idle for a whole measurement."""
        if j.final_state is None and j.diagnosis in ("confirm", "tiebreak") and j.stats.get("speedup"):
            self.confirming[node_id] = max(self.confirming.get(node_id, 0.0), float(j.stats["speedup"]))
            if j.diagnosis == "confirm" and self.speculate:
                self.ctx.index.set_provisional(self.ctx.store.get_node(node_id), math.log(float(j.stats["speedup"])))
        elif j.final_state is not None:
            self.confirming.pop(node_id, None)

    def in_flight(self) -> set[int]:
        """Nodes the loop must not pick up as half-done work: measurements running, candidates
        measured while the baseline was, which wait for its verdict, and re-measured candidates
        whose fresh baseline measurement has not landed yet (see ``hold``)."""
        waiting = {n for n, key in self.reference_for.items() if key in self.flights}
        return set(self.flights) | waiting | (self.held if self.held and not self._baseline_judged() else set())

    def defer_for_time(self, node_id: int) -> bool:
        """Whether a candidate's first measurement must not start: with it (and, if it wins, its
        confirmation), what is in flight and the final verification, the campaign would end after
        ``max_wall_s`` (``timing.dispatch_fits``). It stays queued for a later run; the reason
        becomes the stop reason once what is in flight has landed. Confirmations and other later
        measurements of a candidate already started always go ahead."""
        ctx = self.ctx
        node = ctx.store.get_node(node_id)
        if node.parent_id is None or ctx.store.measurements(node_id):
            return False
        reason = timing.dispatch_fits(ctx, ctx.source(node.artifact_sha))
        if reason is None:
            return False
        self.deferred[node_id] = reason
        ctx.store.append_event(ctx.cid, "deferred", {"reason": reason}, node_id=node_id, agent="loop")
        ctx.report("sandbox_info", {"text": f"node {node_id} left queued for a later run: {reason}"})
        return True

    def early_start(self) -> bool:
        """Whether the baseline's children may be proposed and measured while the baseline itself
        is measured. Every candidate is paired against the reference inside its own measurement,
        so only *judging* needs the baseline (its noise floor, reference time, fingerprint); seven
        idle workers during the first measurement are the largest loss of a short campaign. Not
        when the baseline's verdict brings advice the first proposals should use: a bottleneck
        profile (kernel targets) or warm-start priors from a knowledge store."""
        kn = self.ctx.spec.knowledge
        return EARLY_START and not profiling_on(self.ctx) and (kn is None or not kn.enabled)

    def _baseline_judged(self) -> bool:
        root = self.ctx.index.root()
        return root is not None and root.state in ("accepted", "rejected", "failed", "pruned")

    def hold(self, node) -> bool:  # type: ignore[no-untyped-def]
        """A candidate measured before the baseline was judged waits for that verdict (the Critic
        needs its noise floor), and a re-measured one for the baseline measurement taken beside
        it; True when ``node`` must wait."""
        key = self.reference_for.get(node.id)
        if key is not None:
            if key in self.flights:
                return True
            del self.reference_for[node.id]
        if node.parent_id is None or self._baseline_judged():
            self.held.discard(node.id)
            return False
        self.held.add(node.id)
        return True

    def focus_row(self) -> int | None:
        """The row the next pick must expand, or None for the policy's free choice.

        With several slots to fill, PUCT's scores spread the picks: each pending child is a
        virtual loss on its parent, and every ancestor of the best carries the best's value (Q is
        the best of a subtree), so ancestors and the root take most slots with moves that, tried
        one level deeper under the best, would have been worth as much more as the best already
        is. Measured on landscapes with many independent moves (benchmarks/parallel_scaling.py):
        the move that completed the optimum waited for the fifth free slot under the best while
        four went to its ancestors. So the believed best — the best accepted node or a win still
        being confirmed — keeps half the workers on its own untried moves; the other half, and
        every pick once that share is in flight, follow the policy (exploration, other branches)."""
        if not DIVERSE_PICKS or self.executor.workers < 3:
            return None
        idx = self.ctx.index
        row = idx.leading_row()
        node = idx.node(row) if row is not None else None
        if node is None or not idx.is_expandable(row):
            return None
        return row if idx.pending_children(node.id) < self.executor.workers // 2 else None

    def select_in_flight(self, step: int):  # type: ignore[no-untyped-def]
        """Nothing judged is left to expand, yet workers are free: expand the most promising node
        still awaiting its first verdict (``TreeIndex.speculative``), rather than leave a worker
        idle until a result opens new moves. Its children are measured against the baseline like
        any candidate, so they stay valid if it is rejected. Only ever fills a worker that would
        idle: it never displaces a choice among judged nodes. None when there is none."""
        ctx = self.ctx
        if not EXPAND_IN_FLIGHT or self.executor.free_slots() <= 0:
            return None
        idx = ctx.index
        is_known = lambda sha: idx.has_artifact(sha) and ctx.store.find_node(ctx.cid, sha) is not None  # noqa: E731
        idx.speculative = True
        try:
            return ctx.orchestrator.select(idx, ctx.source, is_known, step)
        finally:
            idx.speculative = False

    def finals_in_flight(self, node_id: int) -> int:
        return sum(1 for f in self.flights.values() if f.node_id == node_id and f.purpose == "final")

    def next_attempt(self, node_id: int) -> int:
        """The next free attempt number of ``node_id``, counting those in flight."""
        ms = self.ctx.store.measurements(node_id)
        return max([m.attempt for m in ms] + [f.attempt for f in self.flights.values() if f.node_id == node_id],
                   default=0) + 1

    def submit_final(self, node_id: int) -> None:
        """One final-verification measurement of an accepted node on a free worker, while the search
        has nothing to give it (``verify.verify_ahead``). The node stays as it is (finished nodes are
        immutable); the measurement is only recorded, under its own attempt number."""
        ctx = self.ctx
        node = ctx.store.get_node(node_id)
        attempt = self.next_attempt(node_id)
        key = (node_id, attempt)
        worker = self.executor.submit(key, measure_task(ctx, ctx.source(node.artifact_sha)))
        self.flights[key] = Flight(node_id, attempt, "final", False)  # type: ignore[index]
        ctx.report("measuring", {"node": node, "attempt": attempt, "purpose": "final", "worker": worker})

    def pending_evaluations(self) -> int:
        return sum(1 for f in self.flights.values() if f.primary)

    def submit(self, node_id: int) -> None:
        ctx = self.ctx
        node = ctx.store.get_node(node_id)
        attempt = len(ctx.store.measurements(node_id)) + 1
        purpose = next_purpose(ctx, node_id)
        ctx.store.start_running(node_id, ctx.owner)
        if node_id in self._recorded_at:  # judged, now measured again: the loop's share of a chain
            self.gaps.append(time.monotonic() - self._recorded_at.pop(node_id))
        task = measure_task(ctx, ctx.source(node.artifact_sha))
        reprobe = None
        root_id = ctx.campaign.root_node_id
        if purpose == "remeasure" and root_id is not None and reference_drifted(ctx.store.verdicts(node_id)[-1]):
            # its reference ran slow or fast: the baseline is measured again so the Critic compares
            # with the machine as it is now — beside it on another free worker (one round, not
            # two; the candidate is judged once both landed), else first on the same worker, as
            # the serial loop does
            root = ctx.store.get_node(root_id)
            ref_task = measure_task(ctx, ctx.source(root.artifact_sha))
            ref_attempt = self._reprobe_attempt(root_id)
            if self.executor.free_slots() >= 2:
                key = ("reference", root_id, ref_attempt)
                self.executor.submit(key, ref_task)
                self.flights[key] = Flight(root_id, ref_attempt, "reference", False)  # type: ignore[index]
                self.reference_for[node_id] = key
            else:
                reprobe = ref_attempt
                task = partial(reprobe_then, ref_task, task)
            ctx.report("measuring", {"node": root, "attempt": ref_attempt, "purpose": "reference"})
        worker = self.executor.submit(node_id, task)
        self.flights[node_id] = Flight(node_id, attempt, purpose, attempt == 1 and node.parent_id is not None,
                                       reprobe_attempt=reprobe)
        if node.parent_id is None and attempt == 1 and self.early_start():
            self.ctx.index.refresh(self.ctx.store)  # a fresh campaign's first step never refreshed it
            self.ctx.index.set_provisional(node, 0.0)  # the baseline is expandable while it is measured
        ctx.report("measuring", {"node": node, "attempt": attempt, "purpose": purpose, "worker": worker})

    def _reprobe_attempt(self, root_id: int) -> int:
        """The baseline's next attempt number, counting those reserved by flights in flight."""
        taken = [m.attempt for m in self.ctx.store.measurements(root_id)]
        taken += [f.attempt for f in self.flights.values() if f.node_id == root_id]
        taken += [f.reprobe_attempt for f in self.flights.values() if f.reprobe_attempt is not None]
        return max(taken, default=0) + 1

    def _record_reprobe(self, f: Flight, reference: dict, key=None) -> None:  # type: ignore[no-untyped-def]
        """Record a fresh measurement of the baseline taken for a re-measured candidate: first on
        the candidate's worker (``f.reprobe_attempt``) or beside it (flight ``key``)."""
        ctx = self.ctx
        root_id = ctx.campaign.root_node_id
        if key is None:
            attempt, for_node = f.reprobe_attempt, f.node_id
        else:
            attempt, for_node = f.attempt, next((n for n, k in self.reference_for.items() if k == key), None)
        before = [m for m in ctx.store.measurements(root_id) if m.status == "ok" and m.baseline_samples]
        ctx.store.record_measurement(root_id, attempt, "reference", reference, ctx.runner.name)
        measure_one.note_reprobe(ctx, attempt, before, reference, for_node=for_node)

    def lag_s(self) -> float:
        """What the loop adds to each measurement of a chain beyond its own duration: handing the
        task over and collecting it, then judging it before the next one (a confirmation) starts.
        Upper quartiles of the last twenty: a budget that holds must not count on a quick loop."""
        def q3(xs: list[float]) -> float:
            recent = sorted(xs[-20:])
            return recent[(3 * len(recent)) // 4] if recent else 0.0

        return q3(self.lags) + q3(self.gaps)

    def record(self, done: Done) -> int | None:
        """Store what a worker returned; returns the node id when it is ready for the Critic."""
        ctx = self.ctx
        f = self.flights.pop(done.key)
        if done.result is not None:
            own = float(done.result.get("duration_s") or done.duration_s or 0.0)
            self.lags.append(max(0.0, time.monotonic() - f.started - own))
            self._recorded_at[f.node_id] = time.monotonic()
        if done.exception is not None:
            raise done.exception
        if f.purpose == "reference":  # the baseline beside a re-measured candidate: nothing to judge
            if done.lost is None:  # lost: the candidate is judged against the baseline's latest
                self._record_reprobe(f, done.result, key=done.key)
            return None
        if f.purpose == "final":  # verification ahead of time: recorded, nothing to judge; a lost one
            if done.lost is None:  # is simply measured again by the final verification
                ctx.store.record_measurement(f.node_id, f.attempt, f.purpose, done.result, ctx.runner.name)
                compile_times.note(ctx, f.node_id, f.attempt, f.purpose, done.result)
            return None
        if done.lost is not None:
            return self._lost(f, done)
        result = done.result
        if f.reprobe_attempt is not None:  # the baseline went first on the same worker
            self._record_reprobe(f, result["reference"])
            result = result["result"]
        ctx.store.record_measurement(f.node_id, f.attempt, f.purpose, result, ctx.runner.name)
        compile_times.note(ctx, f.node_id, f.attempt, f.purpose, result)
        if f.primary:
            ctx.count_evaluation()
        return f.node_id

    def _lost(self, f: Flight, done: Done) -> int | None:
        ctx = self.ctx
        before = [e for e in ctx.store.events(ctx.cid, limit=1_000_000, kinds=["worker_lost"])
                  if e.node_id == f.node_id and (e.payload or {}).get("attempt") == f.attempt]
        ctx.store.append_event(ctx.cid, "worker_lost", {"attempt": f.attempt, "worker": done.worker,
                                                        "why": done.lost, "requeued": not before},
                               node_id=f.node_id, agent="executor")
        ctx.report("sandbox_warning", {"text": f"node {f.node_id}: {done.lost}"
                                               + ("" if before else " — re-queued")})
        if not before:  # back to the queue through its lease: the next free worker measures it
            ctx.store.transition(f.node_id, "queued")
            return None
        result = {"status": "error", "error_class": "harness_error", "error_text":
                  f"worker_lost twice while measuring this candidate: {done.lost}", "correctness": [],
                  "baseline_samples": [], "candidate_samples": [], "fingerprint": {}, "duration_s": done.duration_s}
        ctx.store.record_measurement(f.node_id, f.attempt, f.purpose, result, ctx.runner.name)
        if f.primary:
            ctx.count_evaluation()
        return f.node_id

    def measure(self, state: dict) -> dict:
        return measure(self, state)

    def ahead_s(self, expected: dict[str, float]) -> float:
        """A dispatch's chain and what is in flight, or the final verification, whichever is longer."""
        return max(timing.dispatch_ahead_s(self.ctx), expected["verify_s"]) if expected["step_s"] else 0.0

    def flying(self) -> Iterable[Flight]:
        return self.flights.values()

    def at_once(self, n: int) -> int:
        return n  # each on its own worker

    def finals(self, nodes: list, jobs: list[tuple[int, int]]) -> dict[tuple[int, int], dict]:
        return verify_measure(self, jobs)

    def reprobe(self) -> bool:
        ctx = self.ctx
        return measure_one.reprobe_reference(
            ctx, lambda root, attempt: verify_measure(self, [(root.id, attempt)], report=False).get((root.id, attempt)))

    def verify_ahead(self, best, wanted: int) -> int:  # type: ignore[no-untyped-def]
        """Free workers take ``best``'s missing final measurements (``verify.verify_ahead``)."""
        if not VERIFY_AHEAD:
            return 0
        have = sum(1 for m in self.ctx.store.measurements(best.id) if m.status == "ok") + self.finals_in_flight(best.id)
        n = max(0, min(wanted - have, self.executor.free_slots()))
        for _ in range(n):
            self.submit_final(best.id)
        return n

    def close(self, wait: bool = True) -> None:
        self._stop.set()
        self._beat.join(timeout=5)
        self.executor.close(wait=wait)

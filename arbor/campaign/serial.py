"""The serial measurer: one measurement at a time, in this process, on the campaign's runner.

Nothing is ever in flight between two steps, so the in-flight half of the ``Measurer`` contract is
empty here; what is left is the ``measure`` step of the serial loop and its final measurements, one
after the other.
"""

from __future__ import annotations

from typing import Iterable

from arbor.search_tree.records import NodeRecord

from . import measure_one, store_retry, timing
from .context import Context
from .measurer import Flight, Measurer
from .purposes import next_purpose, reference_drifted


class SerialMeasurer(Measurer):
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.deferred: dict[int, str] = {}  # node -> why it was left queued

    def in_flight(self) -> set[int]:
        return set()

    def pending_evaluations(self) -> int:
        return 0

    def focus_row(self) -> int | None:
        return None

    def select_in_flight(self, step: int):  # type: ignore[no-untyped-def]
        return None

    def measure(self, state: dict) -> dict:
        ctx = self.ctx
        for nid in state.get("node_ids", []):
            node = ctx.store.get_node(nid)
            if node.state != "queued" or nid in self.deferred:
                continue
            attempt = len(ctx.store.measurements(nid)) + 1
            if attempt == 1 and node.parent_id is not None and self.defer_for_time(node):
                continue
            purpose = next_purpose(ctx, nid)
            if purpose == "remeasure" and reference_drifted(ctx.store.verdicts(nid)[-1]):
                measure_one.reprobe_reference(ctx)
            ctx.store.start_running(nid, ctx.owner)
            spilled = store_retry.take_spilled(ctx.spec.runs_dir(), nid, attempt)  # a store refused it
            if spilled is not None:
                purpose, result = spilled["purpose"], spilled["result"]
            else:
                e = timing.expected(ctx)  # once: it reads the campaign's measurements
                ctx.report("measuring", {"node": node, "attempt": attempt, "purpose": purpose,
                                         "expected_s": e["measurement_s"] or None,
                                         "eta_s": timing.eta_s(ctx, ctx.flush_elapsed(), e)})
                result = measure_one.measure_beating(ctx, node.artifact_sha)
            measure_one.record(ctx, nid, attempt, purpose, result)
            if attempt == 1 and node.parent_id is not None:
                ctx.count_evaluation()
        return {}

    def defer_for_time(self, node: NodeRecord) -> bool:
        """The check of a proposed candidate's own kind, before its first measurement: the step
        began because the *median* step fitted, but a candidate that builds a C++ extension in
        every measurement (~30 s each, its confirmation and final too) can be several of them; one
        started at 201 s of 240 ended the campaign at 315 s. It stays queued for a later run, and
        the reason becomes the stop reason (as with several workers: ``Parallel.defer_for_time``)."""
        ctx = self.ctx
        reason = timing.dispatch_fits(ctx, ctx.source(node.artifact_sha))
        if reason is None:
            return False
        self.deferred[node.id] = reason
        ctx.store.append_event(ctx.cid, "deferred", {"reason": reason}, node_id=node.id, agent="loop")
        ctx.report("sandbox_info", {"text": f"node {node.id} left queued for a later run: {reason}"})
        return True

    def hold(self, node: NodeRecord) -> bool:
        return False

    def evidence(self, node_id: int, ev):  # type: ignore[no-untyped-def]
        return ev

    def judged(self, node_id: int, j) -> None:  # type: ignore[no-untyped-def]
        return None

    def ahead_s(self, expected: dict[str, float]) -> float:
        return expected["step_s"] + expected["verify_s"]

    def lag_s(self) -> float:
        return 0.0

    def flying(self) -> Iterable[Flight]:
        return ()

    def at_once(self, n: int) -> int:
        return 1

    def finals(self, nodes: list[NodeRecord], jobs: list[tuple[int, int]]) -> dict[tuple[int, int], dict]:
        ctx, out = self.ctx, {}
        for node, job in zip(nodes, jobs):
            ctx.report("measuring", {"node": node, "attempt": job[1], "purpose": "final", "phase": "verify"})
            out[job] = measure_one.measure_beating(ctx, node.artifact_sha)
        return out

    def reprobe(self) -> bool:
        return measure_one.reprobe_reference(self.ctx)

    def verify_ahead(self, best: NodeRecord, wanted: int) -> int:
        return 0

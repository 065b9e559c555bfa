"""The six steps of a campaign (docs/architecture.md#loop) as plain functions of (Context, state).

Each step reads what it needs from the store and commits what it did before returning, so the
graph can be killed between any two of them. Steps are idempotent with respect to the store:
a resumed campaign re-enters at ``select``, which first drains nodes left half-way
(proposed → guard, queued → measure, measured → critique) before expanding anything new.
"""

from __future__ import annotations

import statistics

from typing import TypedDict

from arbor.agents.critic.gates import Evidence
from arbor.agents.contracts import Judgement
from arbor.agents.priors import MEASURED
from arbor.search_tree.records import NodeRecord
from arbor.search_tree.store import CampaignBusy, DuplicateArtifact

from . import auto_retry, knowledge, speed_of_light, timing
from .context import Context
from .profiling import record_profile
from .stopping import exhausted_reason, headroom, llm_stop_reason, stop_reason
from .verify import run_final_verification, verify_ahead


class LoopState(TypedDict, total=False):
    campaign_id: int
    step: int
    parent_id: int | None
    node_ids: list[int]
    stop_reason: str | None


PENDING = ("proposed", "queued", "running", "measured")


def best_node(nodes: list[NodeRecord]) -> NodeRecord | None:
    accepted = [n for n in nodes if n.state == "accepted" and n.value is not None]
    return max(accepted, key=lambda n: (n.value, -n.id)) if accepted else None


# --- select ----------------------------------------------------------------------------
def select(ctx: Context, state: LoopState) -> LoopState:
    timing.mark_step(ctx)
    if ctx.lease_lost:  # we stalled past the stale limit and another run took over: it writes now
        raise CampaignBusy("this run stalled and another `arbor run` took the campaign over — "
                           "stopping here; the other run carries on")
    flying = ctx.measurer.in_flight()
    deferred = ctx.measurer.deferred  # left queued: no time for them
    pending = [n.id for n in ctx.store.nodes(ctx.cid, states=PENDING) if n.id not in flying and n.id not in deferred]
    if pending:  # finish what a previous step (or a dead process) left half-way
        return {"parent_id": None, "node_ids": pending, "stop_reason": None}
    idx = ctx.index
    idx.refresh(ctx.store)
    elapsed = ctx.flush_elapsed()
    evals = ctx.evaluations() + ctx.measurer.pending_evaluations()
    sol = speed_of_light.for_context(ctx) if ctx.spec.budget.sol_margin is not None else None
    reason = stop_reason(ctx.spec.budget, idx, evals, elapsed, timing.ahead_s(ctx), sol) or llm_stop_reason(ctx.llm)
    if reason is None:  # candidates were left queued: they would not fit
        reason = ctx.measurer.out_of_time()
    if (reason is not None or idx.root() is None) and flying:  # no new work: wait for what is in flight
        verify_ahead(ctx)  # and give free workers the best's final measurements meanwhile
        return {"parent_id": None, "node_ids": [], "stop_reason": None}
    if reason is None and (again := auto_retry.take_due(ctx)) is not None:  # the machine's noise rejected it
        return {"parent_id": None, "node_ids": [again.id], "stop_reason": None}
    if reason is None:
        knowledge.ensure_warm_start(ctx)  # priors from similar problems, once the baseline is judged
        # the index (just refreshed) rules out almost every sha without a query; the store confirms
        is_known = lambda sha: idx.has_artifact(sha) and ctx.store.find_node(ctx.cid, sha) is not None  # noqa: E731
        sel = None
        focus = ctx.measurer.focus_row()
        if focus is not None:  # several workers: the believed best keeps its share of them
            idx.focus = focus
            try:
                sel = ctx.orchestrator.select(idx, ctx.source, is_known, state.get("step", 0))
            finally:
                idx.focus = None
        if sel is None:
            sel = ctx.orchestrator.select(idx, ctx.source, is_known, state.get("step", 0))
        if sel is None and flying:  # free workers: bet on a node still being measured
            sel = ctx.measurer.select_in_flight(state.get("step", 0))
        if sel is None:  # the fixed moves are spent: a generated kernel's schedule space, if there is headroom
            left, bound = headroom(sol if sol is not None else speed_of_light.for_context(ctx), idx.best_speedup())
            sel, why_not = ctx.orchestrator.schedule_space(idx, ctx.source, is_known, left, bound)
        if sel is None:  # a candidate left queued for want of time says so, not "no move left"
            reason = ctx.measurer.out_of_time(exhausted=True) or \
                exhausted_reason(ctx.spec.budget, elapsed, evals, left, why_not, _ruled_out(ctx))
            if flying:  # what is in flight may open new moves when it is accepted
                verify_ahead(ctx)
                return {"parent_id": None, "node_ids": [], "stop_reason": None}
        else:
            ctx.store.append_event(ctx.cid, "select", {"parent": sel.parent.id, "why": sel.score_note},
                                   agent=ctx.orchestrator.name)
            ctx.selection = sel  # handed to propose within this process only
            return {"parent_id": sel.parent.id, "node_ids": [], "stop_reason": None}
    return {"parent_id": None, "node_ids": [], "stop_reason": reason}


def _ruled_out(ctx: Context) -> str:
    """What the exhausted stop adds when family posteriors ruled moves out (agents/priors.py)."""
    outcomes = ctx.orchestrator.outcome_index()
    gone = dict(getattr(outcomes, "ruled_out", None) or {})
    if not gone:
        return ""
    why = sorted(set(gone.values()))
    return (f" ({len(gone)} more ruled out by what their family measured: {', '.join(sorted(gone))} — "
            f"{'; '.join(why[:3])}; `arbor show` on a node gives its family's posterior)")


# --- propose ---------------------------------------------------------------------------
def propose(ctx: Context, state: LoopState) -> LoopState:
    if state.get("node_ids"):
        return {}
    sel = ctx.selection
    if sel is None or sel.parent.id != state.get("parent_id"):
        return {"node_ids": []}
    ctx.selection = None
    ids = []
    for prop in ctx.specialist.propose(sel.parent, sel.options, ctx.spec.agents.proposals_per_step):
        sha = ctx.store.put_artifact(prop.source, ctx.target.artifact_kind)
        try:
            node = ctx.store.add_node(ctx.cid, sha, ctx.specialist.name, parent_id=sel.parent.id,
                                      move_id=prop.move_id, family=prop.family, hypothesis=prop.hypothesis,
                                      prior=prop.prior, predicted_gain=prop.predicted_gain,
                                      step=state.get("step", 0))
        except DuplicateArtifact:
            continue
        ctx.store.append_event(ctx.cid, "propose", {"move": prop.move_id, "prior": prop.prior,
                                                    **prop.audit},  # LLM: reply event, mode, prompt
                               node_id=node.id, agent=ctx.specialist.name)
        ids.append(node.id)
    return {"node_ids": ids}


# --- guard -----------------------------------------------------------------------------
def guard(ctx: Context, state: LoopState) -> LoopState:
    for nid in state.get("node_ids", []):
        node = ctx.store.get_node(nid)
        if node.state != "proposed":
            continue
        verdict = None if node.parent_id is None else ctx.target.static_check(ctx.critic, ctx.source(node.artifact_sha))
        if verdict is None:
            ctx.store.transition(nid, "queued")
        else:
            _finish(ctx, node, verdict, measurement_id=None)
    return {}


# --- measure ---------------------------------------------------------------------------
def measure(ctx: Context, state: LoopState) -> LoopState:
    """One at a time here (``serial``), or handed to free workers (``parallel``)."""
    return ctx.measurer.measure(state)  # type: ignore[return-value]


# --- critique --------------------------------------------------------------------------
def _evidence(ctx: Context, node: NodeRecord) -> tuple[Evidence, object]:
    ms = ctx.store.measurements(node.id)
    last = ms[-1]
    verdicts = ctx.store.verdicts(node.id)
    parent = ctx.store.get_node(node.parent_id) if node.parent_id else None
    prev, earlier = None, []
    if last.purpose in ("confirm", "tiebreak"):  # what the Critic computed for the attempts it asked about

        def asked(diagnosis: str) -> float | None:
            vs = [v for v in verdicts if v.diagnosis == diagnosis and v.measurement_id is not None]
            return next((g["stats"] for g in (vs[-1].gates if vs else []) if "stats" in g), {}).get("speedup")

        prev = asked("confirm")
        if last.purpose == "tiebreak":
            earlier = [x for x in (prev, asked("tiebreak")) if x is not None]
    root_id = ctx.campaign.root_node_id
    base_fp = base_ref = probe = None
    if root_id is not None and root_id != node.id:
        root_ms = [m for m in ctx.store.measurements(root_id) if m.status == "ok"]
        base_fp = root_ms[-1].fingerprint if root_ms else None
        base_ref = statistics.median(root_ms[-1].baseline_samples) if root_ms and root_ms[-1].baseline_samples else None
        probe = _fresh_probe(root_ms, ms)
    ev = Evidence(
        is_root=node.parent_id is None, attempt=last.attempt, purpose=last.purpose, status=last.status,
        error_class=last.error_class, error_text=last.error_text, correctness=last.correctness or [],
        parent_speedup=(parent.speedup or 1.0) if parent else 1.0,
        best_speedup=ctx.index.best_speedup(),
        noise_floor=ctx.noise_floor,
        remeasures_done=sum(1 for v in verdicts if v.decision == "remeasure"
                            and v.diagnosis in ("unstable", "env_drift")),
        previous_speedup=prev, earlier_speedups=earlier, baseline_reference_s=base_ref, reference_probe_s=probe,
        earlier_taxes=[g["tax"] for v in verdicts if v.decision == "remeasure" for g in v.gates or []
                       if g.get("tax") is not None],
        fingerprint=last.fingerprint or {}, baseline_fingerprint=base_fp, facts=last.stats or {},
        earlier_looks=_looks(verdicts) if last.purpose == "extend" else [],
        extra_looks_allowed=timing.looks_that_fit(ctx, node.id) if node.parent_id is not None else None,
    )
    return ev, last


def _looks(verdicts: list) -> list[dict]:
    """The stats of each earlier measurement the Critic found undecided (its sequential test)."""
    return [st for v in verdicts if v.decision == "remeasure" and v.diagnosis == "extend"
            for st in [next((g["stats"] for g in v.gates or [] if "stats" in g), None)] if st]


def _fresh_probe(root_ms: list, ms: list) -> float | None:
    """The reference's median in a baseline measurement of purpose ``reference`` (the reference
    alone, in a sandbox with no candidate code: ``measure_one.reprobe_reference``) taken since this node's
    previous attempt; None when there was none. Against it the Critic tells a reference slowed by
    the machine (slow there too) from one slowed inside the candidate's process. With several
    workers the probe runs beside the re-measurement and may land after it (the node is judged
    once both have landed), so it counts from the previous attempt on, not only up to the last."""
    if len(ms) < 2:
        return None
    probes = [m for m in root_ms if m.purpose == "reference" and m.id > ms[-2].id and m.baseline_samples]
    return statistics.median(probes[-1].baseline_samples) if probes else None


def critique(ctx: Context, state: LoopState) -> LoopState:
    for nid in state.get("node_ids", []):
        node = ctx.store.get_node(nid)
        if node.state != "measured":
            continue
        ctx.index.refresh(ctx.store)  # the best so far decides whether a win needs confirming
        if ctx.measurer.hold(node):  # e.g. measured before the baseline's verdict
            continue
        ev, m = _evidence(ctx, node)
        ev = ctx.measurer.evidence(node.id, ev)  # e.g. wins still being confirmed count as the best to beat
        j = ctx.target.judge(ctx.critic, ev, m)
        ctx.measurer.judged(node.id, j)
        # An LLM Critic may add a root-cause narrative, never change the verdict; the parent's
        # source is read only by a critic that asks for it.
        j = ctx.critic.narrate(node, j, ctx.source(node.artifact_sha), lambda: _parent_source(ctx, node), m)
        _finish(ctx, node, j, measurement_id=m.id)
    return {}


def _parent_source(ctx: Context, node: NodeRecord) -> str | None:
    return ctx.source(ctx.store.get_node(node.parent_id).artifact_sha) if node.parent_id else None


def _finish(ctx: Context, node: NodeRecord, j: Judgement, measurement_id: int | None) -> None:
    gates = j.gates + ([{"stats": j.stats}] if j.stats else [])
    if j.final_state is None:  # remeasure: back to the queue with the verdict saying why
        ctx.store.record_verdict(node.id, measurement_id, j.decision, j.diagnosis, j.reason, gates,
                                 agent=ctx.critic.name, requeue=True)
    else:
        fields = {}
        if j.final_state == "accepted":
            fields = {"value": j.value, "speedup": j.speedup}
        elif j.diagnosis in MEASURED and j.speedup:  # no value, but what it measured teaches its family
            fields = {"speedup": j.speedup}
        reason = j.reason if measurement_id is not None else f"[guard] {j.reason}"
        ctx.store.record_verdict(node.id, measurement_id, j.decision, j.diagnosis, reason, gates,
                                 agent=ctx.critic.name, final_state=j.final_state, **fields)
        knowledge.record_judgement(ctx, node, j)
        auto_retry.note_rejection(ctx, node, j.diagnosis if j.final_state != "accepted" else None)
        if node.parent_id is None and j.noise_floor is not None:
            ctx.set_noise_floor(j.noise_floor)
            ctx.store.append_event(ctx.cid, "baseline", {"noise_floor": j.noise_floor, "stats": j.stats},
                                   node_id=node.id, agent=ctx.critic.name)
            record_profile(ctx, node, "baseline")
    ctx.report("verdict", {"node": ctx.store.get_node(node.id), "judgement": j})


def requeued(ctx: Context, state: LoopState) -> bool:
    """Queued nodes of this step still to measure (a node left queued for want of time is not:
    measuring it again would loop here forever)."""
    return any(n not in ctx.measurer.deferred and ctx.store.get_node(n).state == "queued"
               for n in state.get("node_ids", []))


# --- update ----------------------------------------------------------------------------
def _time_to_profile(ctx: Context, node_id: int) -> bool:
    """A new best's profile (advice for the next steps) runs only when it leaves the final
    verification its time: a profile job imports the candidate as a measurement does, and for one
    that builds a C++ extension that is ~25 s; profiled at 178 s of 210, the quickstart's best
    ended the campaign at 228 s."""
    need = timing.measurement_s(ctx, node_id) + timing.expected(ctx)["verify_s"]
    if timing.time_left(ctx) >= need:
        return True
    ctx.report("sandbox_info", {"text": f"no profile of node {node_id}: it and the final verification "
                                        f"(~{need:.0f} s) would not finish inside max_wall_s"})
    return False


def update(ctx: Context, state: LoopState) -> LoopState:
    ctx.flush_elapsed()
    ctx.index.refresh(ctx.store)
    best = ctx.index.best()
    if best is not None and best.id in state.get("node_ids", []) and best.parent_id is not None:
        ctx.store.append_event(ctx.cid, "new_best", {"node": best.id, "speedup": best.speedup},
                               node_id=best.id, agent="loop")
        ctx.report("new_best", {"node": best})
        if _time_to_profile(ctx, best.id):
            record_profile(ctx, best, "new best")
    return {"step": state.get("step", 0) + 1, "node_ids": [], "parent_id": None}


# --- finalize --------------------------------------------------------------------------
def finalize(ctx: Context, state: LoopState) -> LoopState:
    knowledge.after_campaign(ctx, run_final_verification(ctx))
    ctx.flush_elapsed()
    return {}

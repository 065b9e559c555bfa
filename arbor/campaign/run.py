"""Setting up, resuming and summarising a campaign: the glue between the spec, the store,
the agents and the sandbox. The loop itself lives in ``graph.py``; this module only decides
what to hand it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from arbor.sandbox.runners.proctree import pid_alive
from arbor.search_tree import open_store
from arbor.search_tree.sql.errors import first_line
from arbor.search_tree.store import CampaignBusy, Store
from arbor.spec import CampaignSpec, precision_of
from arbor.targets import make_adapter, traits

from . import changes, compile_times, timing
from .agent_setup import build_agents
from .context import Context
from .graph import run_loop
from .run_guard import Heartbeat, new_owner
from .parallel import close_measurer, open_measurer
from .serial import SerialMeasurer
from .profiling import restore_profile
from .sandbox_setup import open_sandbox
from .final_best import pick
from .verify import read_final_verification

STALE_LEASE_S = 60.0
HEARTBEAT_S = 5.0


@dataclass
class Summary:
    campaign: str
    status: str
    stop_reason: str | None
    baseline_s: float | None
    best_s: float | None
    speedup: float | None
    ci: tuple[float, float] | None
    best_node: int | None
    counts: dict[str, int]
    measurements: int
    elapsed_s: float
    best_path: str | None
    serving: dict | None = None  # serving campaigns: objective, Pareto improvement, both fronts
    llm: dict | None = None  # LLM agents: prompt/completion tokens and USD spent (None: no LLM calls)
    verified: dict | None = None  # final verification of the best: its node, speedups, median
    node_speedup: float | None = None  # the best node's Critic value (what history/tree/show say)
    failed: str | None = None  # why the campaign has no valid result (exit code 1), None when it has one
    clock: str | None = None  # what baseline_s/best_s are: 'cpu' (timing thread's CPU time) or 'wall'
    precision: str | None = None  # kernel campaigns: the precision mode every number was measured in
    # kernel targets: the reference's and the best's fraction of the speed of light and what more
    # would take (arbor/campaign/speed_of_light.py); None where no cost or peak is known
    speed_of_light: str | None = None
    # a compiled best: its first measurement's compile and measurement time beside its later ones'
    # (loaded from the compile cache), compile_times.of_node; None when the best compiles nothing
    compile: dict | None = None

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["ci"] = list(self.ci) if self.ci else None
        return d


def build_context(spec: CampaignSpec, store: Store, report: Callable[[str, dict], None],
                  target=None) -> Context:  # type: ignore[no-untyped-def]
    if target is None:
        target = make_adapter(spec)
        target.validate()
    campaign = store.get_or_create_campaign(spec.name, target.kind, spec.model_dump(mode="json"))
    owner = new_owner()  # one writer per campaign: taken before anything is written or started
    previous = store.acquire_campaign(campaign.id, owner, STALE_LEASE_S, pid_alive=pid_alive)
    if previous is not None:
        report("lease_taken_over", previous)
    runner = None
    try:
        # runner + clock guard, per spec.sandbox; a GPU that cannot start inside it stops here
        runner = open_sandbox(spec, store, campaign.id, report)
        target.prewarm(runner)  # its warm worker imports torch while the agents are built
        agents = build_agents(spec, target, spec.load_skills(), store=store, campaign_id=campaign.id)
    except BaseException:
        if runner is not None:
            runner.close()
        _best_effort(lambda: store.release_campaign(campaign.id, owner))  # no Context owns the lease yet
        raise
    ctx = Context(spec=spec, store=store, campaign=campaign, target=target, runner=runner,
                  critic=agents.critic, orchestrator=agents.orchestrator, specialist=agents.specialist,
                  report=report, llm=agents.llm, owner=owner)
    ctx.measurer = SerialMeasurer(ctx)  # until run_campaign opens the one spec.executor asks for
    if agents.llm is not None:  # an LLM request never waits past the wall budget
        agents.llm.time_left = lambda: timing.time_left(ctx)
    for ev in store.events(campaign.id, limit=1_000_000, kinds=["baseline"]):
        ctx.set_noise_floor(float(ev.payload.get("noise_floor", 0.0)))
    restore_profile(ctx)
    return ctx


def ensure_root(ctx: Context) -> None:
    ctx.campaign = add_root(ctx.store, ctx.campaign, ctx.target)


def add_root(store: Store, campaign, target):
    """The baseline node (once per campaign); returns the campaign record."""
    if campaign.root_node_id is not None:
        return campaign
    source = target.root_source()
    sha = store.put_artifact(source, target.artifact_kind)
    node = store.find_node(campaign.id, sha) or store.add_node(
        campaign.id, sha, "baseline", hypothesis="the reference implementation (A/A: sets the noise floor)")
    campaign = store.update_campaign(campaign.id, root_node_id=node.id)
    store.append_event(campaign.id, "campaign_created", {"target": target.describe()}, agent="loop")
    return campaign


def run_campaign(spec: CampaignSpec, report: Callable[[str, dict], None], store: Store | None = None,
                 restart: bool = False, fork: str | None = None, target=None) -> Summary:  # type: ignore[no-untyped-def]
    """Raises CampaignChanged when the stored campaign was measured under other fingerprints
    (``changes.py``); ``restart``/``fork`` are the user's answers to that. ``target``: an adapter
    for the spec's target built by the caller (``arbor redteam`` hands it measurements it took in
    batches); by default ``make_adapter(spec)``."""
    target = target if target is not None else make_adapter(spec)
    target.validate()  # a bad spec or problem is refused before any store file exists
    own_store = store is None
    store = store or open_store(spec.store_url())
    ctx = None
    try:
        spec = changes.check(store, spec, restart=restart, fork=fork, report=report)
        ctx = build_context(spec, store, report, target)
        changes.record(store, spec, ctx.cid)
        requeued = store.requeue_orphans(ctx.cid, STALE_LEASE_S, spec.budget.max_node_crashes, pid_alive=pid_alive)
        if requeued:
            report("requeued", {"nodes": requeued})
        ensure_root(ctx)
        ctx.measurer = open_measurer(ctx)
        store.update_campaign(ctx.cid, status="running")
        store.append_event(ctx.cid, "run_started", {"owner": ctx.owner, "requeued": requeued}, agent="loop")
        steps_done = max((n.step for n in store.nodes(ctx.cid)), default=0) + 1
        try:
            with Heartbeat(ctx, HEARTBEAT_S):
                reason = run_loop(ctx, spec.runs_dir() / "checkpoints.sqlite", steps_done)
        except KeyboardInterrupt as stop:
            close_measurer(ctx, wait=False)
            ctx.flush_elapsed()
            by = f"stopped by {stop.args[0]}" if stop.args else "interrupted by the user"  # SIGTERM/SIGHUP
            store.update_campaign(ctx.cid, status="interrupted", stop_reason=by)
            store.append_event(ctx.cid, "run_interrupted", {}, agent="loop")
            raise
        except CampaignBusy:  # the campaign is another run's now: write nothing more
            raise
        except Exception as exc:  # a store fault (disk full, server gone): say so if the store still can
            _best_effort(lambda: store.update_campaign(ctx.cid, status="interrupted",
                                                       stop_reason=f"stopped: {first_line(exc)[:200]}"))
            raise
        finally:
            ctx.runner.close()
        ctx.flush_elapsed()
        store.update_campaign(ctx.cid, status="finished", stop_reason=reason)
        store.append_event(ctx.cid, "run_finished", {"stop_reason": reason}, agent="loop")
        return summarize(store, spec.name, write_best_to=spec.runs_dir())
    finally:
        if ctx is not None:
            close_measurer(ctx)
            ctx.runner.close()  # idempotent; also covers a failure before the loop started
            # the store itself may have failed: a dead owner's lease is taken over anyway
            _best_effort(lambda: store.release_campaign(ctx.cid, ctx.owner))
        if own_store:
            store.close()


def _best_effort(write: Callable[[], object]) -> None:
    try:
        write()
    except Exception:
        pass


def summarize(store: Store, name: str, write_best_to: Path | None = None) -> Summary:
    camp = store.get_campaign(name)
    nodes = store.nodes(camp.id)
    root = next((n for n in nodes if n.id == camp.root_node_id), None)
    outcome = read_final_verification(store, camp.id)
    final = pick(nodes, outcome)  # the median of several measurements decides (final_best.py)
    best = final.node
    verified = next((v for v in outcome["nodes"] if v["node_id"] == best.id), None) \
        if final.verified and best is not None else None
    baseline_s = best_s = None
    ci = None
    if root is not None:
        ms = [m for m in store.measurements(root.id) if m.status == "ok"]
        if ms:
            import statistics

            baseline_s = statistics.median(ms[-1].baseline_samples)
    if best is not None and best.parent_id is not None:
        stats = _accepted_stats(store, best.id)
        if stats:
            best_s = stats.get("candidate_median_s")
            ci = (stats.get("ci_low"), stats.get("ci_high"))
    elif best is not None:
        best_s = baseline_s
    kind = traits(camp.kind)
    serving = kind.objective_summary(store, camp.root_node_id, best)
    if not kind.reports_times:
        baseline_s = best_s = None
    path = None
    if best is not None and write_best_to is not None:
        write_best_to.mkdir(parents=True, exist_ok=True)
        out = write_best_to / kind.best_artifact_name
        out.write_text(store.get_artifact(best.artifact_sha))
        path = str(out)
    totals = store.event_totals(camp.id)
    used = totals["prompt_tokens"] or totals["completion_tokens"] or totals["cost_usd"]
    llm = {k: totals[k] for k in ("prompt_tokens", "completion_tokens", "cost_usd")} if used else None
    speedup = (verified["speedup"] if verified else
               math.exp(best.value) if best and best.value is not None else None)
    if kind.reports_times and best is not None and best.parent_id is not None and speedup:
        from .one_number import paired_estimate  # times and CI of the measurement that IS this ratio

        est = paired_estimate(store, best.id, speedup)
        baseline_s, best_s, ci = est if est else (baseline_s, best_s, ci)
    if serving is not None and verified and best is not None and speedup:
        from .one_number import paired_ratio_estimate  # the CI of the verified median, not the Critic's

        rci = paired_ratio_estimate(store, best.id, speedup)
        serving.update(ratio=speedup, ci_low=rci[0] if rci else None, ci_high=rci[1] if rci else None)
    sol = None
    if kind.reports_times and root is not None:
        from .speed_of_light import reference_position

        pos = reference_position(store, root.id, best.id if best is not None else None)
        sol = pos.line(baseline_s, best_s) if pos is not None else None
    return Summary(
        campaign=name, status=camp.status, stop_reason=camp.stop_reason, baseline_s=baseline_s,
        best_s=best_s, speedup=speedup,
        ci=ci, best_node=best.id if best else None, counts=store.count_by_state(camp.id),
        measurements=store.measurement_count(camp.id), elapsed_s=camp.elapsed_s, best_path=path,
        serving=serving, llm=llm, verified=verified, node_speedup=best.speedup if best else None,
        failed=failure(camp, nodes), clock=_clock(store, best, root) if kind.reports_times else None,
        precision=precision_of((camp.spec or {}).get("target")), speed_of_light=sol,
        compile=compile_times.of_node(store.measurements(best.id)) if best is not None else None,
    )


def _clock(store, best, root) -> str | None:  # type: ignore[no-untyped-def]
    from .one_number import times_clock

    node = best if best is not None else root
    return times_clock(store, node.id if node is not None else None)


def failure(camp, nodes) -> str | None:
    """Why a campaign ended without a valid result: its baseline failed or was unstable, or no
    candidate produced a valid measurement. None when there is a result (even "no win")."""
    root = next((n for n in nodes if n.id == camp.root_node_id), None)
    if root is None:
        return "no baseline was measured"
    if root.state in ("rejected", "failed"):
        return f"baseline {root.diagnosis or root.state}"
    others = [n for n in nodes if n.id != root.id]
    if others and all(n.state == "failed" for n in others) and camp.status == "finished":
        return "no candidate produced a valid measurement"
    return None


def _accepted_stats(store: Store, node_id: int) -> dict | None:
    for v in reversed(store.verdicts(node_id)):
        if v.decision == "accept":
            for g in v.gates:
                if "stats" in g:
                    return g["stats"]
    return None

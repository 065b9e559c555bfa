"""The loop's bottleneck-profile hook: profile the baseline and each new best, store a ``profile``
event, and hand the profile to the agents (heuristic aiming, LLM prompts).

One call from the loop's steps (``record_profile``); everything else lives here. A profile is
advice: any failure is stored as ``{"error": ...}`` and the campaign goes on.
"""

from __future__ import annotations

from arbor.agents.specialists.kernel_heuristic import MAX_PROFILE_RISE
from arbor.sandbox.gpu import cached_cpu_peak, gpu_peak, merge_peaks
from arbor.sandbox.kernel.profile_job import format_profile, run_profile

from .context import Context


def _peak(ctx: Context, stats: dict | None, fingerprint: dict | None) -> dict | None:
    """The rates the campaign runs at, as its measurement read them (``sol_peak``): on CPU measured
    at the campaign's thread count (the cache when the measurement predates them), on a GPU the
    board's measured rates, else its datasheet row — with the FLOP rate the precision mode can
    reach: fp32 mode forbids TF32, so its GEMMs are read against the fp32 rate."""
    t = ctx.spec.target
    sol = (stats or {}).get("sol_peak")
    if t.device.startswith("cuda"):
        if sol and sol.get("bytes_per_s"):
            return sol
        p = gpu_peak((fingerprint or {}).get("gpu_name") or (fingerprint or {}).get("device_name"))
        if p is None:
            return None
        flops = p.fp32_flops if t.precision == "fp32" else p.flops_for(t.dtype)
        return {"flops_per_s": flops, "bytes_per_s": p.bytes_per_s, "source": f"datasheet {p.name}"}
    cached = cached_cpu_peak(t.num_threads)  # merged by maximum: a busier run's peak never wins
    return merge_peaks(sol, cached) if sol and cached and sol.get("bandwidth") else (sol or cached)


def hand_to_agents(ctx: Context, profile: dict) -> None:
    if profile.get("error"):
        return
    ctx.specialist.set_profile(profile)
    ctx.orchestrator.priors_may_rise(MAX_PROFILE_RISE)


def profiling_on(ctx: Context) -> bool:
    """The target kind has op-level profiles and the campaign did not switch them off."""
    return bool(ctx.target.profiles and ctx.spec.measurement.profile)


def record_profile(ctx: Context, node, why: str) -> dict | None:  # type: ignore[no-untyped-def]
    """Profile ``node``'s source, store it as a ``profile`` event and aim the agents with it."""
    if not profiling_on(ctx):  # no op-level profile for this target kind, or switched off
        return None
    try:
        source = ctx.store.get_artifact(node.artifact_sha)
        ms = [m for m in ctx.store.measurements(node.id) if m.status == "ok"]
        last = ms[-1] if ms else None
        times = sorted(last.candidate_samples) if last and last.candidate_samples else []
        profile = run_profile(ctx.runner, ctx.target.request(source),
                              _peak(ctx, last.stats if last else None, last.fingerprint if last else None),
                              times[len(times) // 2] if times else None)
    except Exception as exc:  # noqa: BLE001 - advice only
        profile = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    ctx.store.append_event(ctx.cid, "profile", {"why": why, **profile}, node_id=node.id, agent="profiler")
    for bug in profile.get("anomalies") or []:  # impossible readings are reported, never shown as numbers
        ctx.report("sandbox_info", {"text": f"profile of node {node.id}: BUG: {bug}"})
    hand_to_agents(ctx, profile)
    return profile


def restore_profile(ctx: Context) -> None:
    """On resume, the latest stored profile aims the agents again."""
    events = [e for e in ctx.store.events(ctx.cid, limit=1_000_000, kinds=["profile"]) if not e.payload.get("error")]
    if events:
        hand_to_agents(ctx, dict(events[-1].payload))


def profile_of(store, node_id: int, campaign_id: int) -> dict | None:  # type: ignore[no-untyped-def]
    for e in reversed(store.events(campaign_id, limit=1_000_000, kinds=["profile"])):
        if e.node_id == node_id:
            return dict(e.payload)
    return None

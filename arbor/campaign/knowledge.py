"""The campaign's side of knowledge: records of judged candidates, warm-start priors, revocation
and the calibration table (docs/architecture.md#knowledge).

Everything the campaign learns or uses goes into its own store as append-only events first
(``signature``, ``knowledge``, ``warm_start``, ``knowledge_revoked``, ``calibration``), so a
resumed campaign replays the same warm priors and a report can say where every prior came from.
The user-level knowledge store is written after the event, and a failure to reach it is a
notice, never a failed campaign.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from arbor.agents.contracts import Judgement
from arbor.agents.knowledge.brief import Neighbour, neighbours
from arbor.agents.knowledge.calibration import Calibration, log_or_none
from arbor.agents.knowledge.signature import hardware_class, signature_from_profile
from arbor.agents.knowledge.recipes import Recipe, recipes
from arbor.agents.knowledge.warm import warm_priors
from arbor.search_tree.knowledge import KnowledgeError, KnowledgeRecord, KnowledgeStore
from arbor.search_tree.records import NodeRecord

if TYPE_CHECKING:  # the Context holds this module's cache (KnowledgeCache)
    from .context import Context

INTEGRITY_FAILURES = {"hack_suspected", "incorrect"}
HYPOTHESIS_KEPT = 600  # characters of a candidate's hypothesis kept in its record (the brief's words)
ALL = 1_000_000


@dataclass
class KnowledgeCache:
    """What one campaign process keeps of this module's reads (``Context.knowledge``)."""
    opened: bool = False  # the store was opened, or failed to open (then ``store`` stays None)
    store: KnowledgeStore | None = None
    fingerprint: dict | None = None  # the baseline's (fixed once judged)
    signature: dict | None = None  # the problem's
    warm_done: bool = False  # the warm start was applied (or replayed) in this process


def _events(store, cid: int, kind: str) -> list:  # type: ignore[no-untyped-def]
    return store.events(cid, limit=ALL, kinds=[kind])


def open_knowledge(ctx: Context) -> KnowledgeStore | None:
    cfg = ctx.spec.knowledge
    if cfg is None or not cfg.enabled:
        return None
    cache = ctx.knowledge
    if not cache.opened:
        cache.opened = True
        try:
            cache.store = KnowledgeStore(cfg.url)
        except KnowledgeError as exc:
            ctx.report("sandbox_info", {"text": f"knowledge store unavailable: {exc}"})
    return cache.store


# --- what this campaign is -----------------------------------------------------------------
def _baseline_fingerprint(ctx: Context) -> dict:
    if ctx.knowledge.fingerprint:
        return ctx.knowledge.fingerprint
    root = ctx.campaign.root_node_id
    ms = [m for m in ctx.store.measurements(root) if m.status == "ok"] if root else []
    fp = (ms[-1].fingerprint or {}) if ms else {}
    ctx.knowledge.fingerprint = fp  # the baseline's is fixed once judged: read it once
    return fp


def signature(ctx: Context) -> dict:
    """The problem's signature: from the baseline's profile when one was recorded, otherwise
    from the target (a trace of the reference); computed once and kept as an event."""
    if ctx.knowledge.signature is not None:
        return ctx.knowledge.signature
    evs = _events(ctx.store, ctx.cid, "signature")
    if evs:
        sig = evs[-1].payload
    else:
        dtype = getattr(ctx.spec.target, "dtype", None)
        sig = None
        for e in _events(ctx.store, ctx.cid, "profile"):  # the baseline's bottleneck profile, if any
            if e.node_id == ctx.campaign.root_node_id:
                sig = signature_from_profile(e.payload, dtype)
        if sig is None:  # a trace costs a child process: only worth it when knowledge is shared
            sig = ctx.target.signature(trace=open_knowledge(ctx) is not None)
        ctx.store.append_event(ctx.cid, "signature", sig, agent="knowledge")
    ctx.knowledge.signature = sig
    return sig


def software(fp: dict) -> dict:
    return {"torch": fp.get("torch")}


# --- records -------------------------------------------------------------------------------
def record_judgement(ctx: Context, node: NodeRecord, j: Judgement) -> None:
    """One knowledge record per judged candidate (final verdicts only; the baseline is not a move)."""
    if node.parent_id is None or node.move_id is None or j.final_state is None:
        return
    try:
        fp = _baseline_fingerprint(ctx)
        sig = signature(ctx)
        speedup = j.speedup if j.speedup is not None else (j.stats or {}).get("speedup")
        rec = KnowledgeRecord(
            campaign=ctx.campaign.name, node_id=node.id, artifact_sha=node.artifact_sha,
            hardware=hardware_class(fp), software=software(fp), signature=sig,
            move_id=node.move_id, family=node.family, agent=node.specialist, diagnosis=j.diagnosis,
            decision=j.decision, speedup=float(speedup) if speedup is not None else None,
            integrity_ok=j.diagnosis not in INTEGRITY_FAILURES, p_accept=node.prior,
            predicted_gain=node.predicted_gain, **_lineage(ctx, node),
            extra={"hypothesis": (node.hypothesis or "")[:HYPOTHESIS_KEPT]})
        ctx.store.append_event(ctx.cid, "knowledge", rec.to_json(), node_id=node.id, agent="knowledge")
        ks = open_knowledge(ctx)
        if ks is not None and "error" not in sig:
            ks.add([rec])
    except Exception as exc:  # noqa: BLE001 - knowledge is advice: never fail the campaign for it
        ctx.report("sandbox_info", {"text": f"knowledge record of node {node.id} not kept: {exc}"})


def _lineage(ctx: Context, node: NodeRecord) -> dict:
    """The parent's speedup and the moves on the path from the baseline to the parent."""
    path, parent = [], ctx.store.get_node(node.parent_id)
    parent_speedup = parent.speedup if parent.parent_id is not None else 1.0
    cur = parent
    while cur is not None and cur.parent_id is not None:
        path.append(cur.move_id)
        cur = ctx.store.get_node(cur.parent_id)
    return {"parent_speedup": parent_speedup, "path": path[::-1]}


def campaign_records(store, cid: int) -> list[KnowledgeRecord]:  # type: ignore[no-untyped-def]
    """This campaign's records, with revocations applied."""
    revoked = {e.payload["artifact_sha"]: e.payload.get("reason", "revoked")
               for e in _events(store, cid, "knowledge_revoked")}
    final = {e.payload["artifact_sha"]: e.payload.get("speedup") for e in _events(store, cid, "knowledge_final")}
    out = []
    for e in _events(store, cid, "knowledge"):
        r = KnowledgeRecord.from_json(e.payload)
        if r.artifact_sha in revoked:
            r = replace(r, revoked=revoked[r.artifact_sha])
        if r.artifact_sha in final:
            r = replace(r, extra={**r.extra, "verified_final": final[r.artifact_sha]})
        out.append(r)
    return out


def revoke(ctx: Context, artifact_sha: str, reason: str) -> None:
    """A candidate later found hostile or incorrect: its records are never positive evidence again."""
    ctx.store.append_event(ctx.cid, "knowledge_revoked", {"artifact_sha": artifact_sha, "reason": reason},
                           agent="critic")
    ks = open_knowledge(ctx)
    if ks is not None:
        ks.revoke(artifact_sha, reason)


# --- warm start ----------------------------------------------------------------------------
def ensure_warm_start(ctx: Context) -> None:
    """Once the baseline is judged, load what similar problems taught: warm priors and recipes
    into the heuristic Orchestrator's outcome index, and the brief (``agents/knowledge/brief.py``)
    to the Specialist. Replayed from the ``warm_start`` event on resume, computed from the
    knowledge store otherwise (only when the campaign names one)."""
    if ctx.knowledge.warm_done:
        return
    root = ctx.campaign.root_node_id
    if root is None or ctx.store.get_node(root).state != "accepted":
        return
    ctx.knowledge.warm_done = True
    evs = _events(ctx.store, ctx.cid, "warm_start")
    payload = evs[-1].payload if evs else _warm_payload(ctx)
    if payload is None:
        return
    found = [Neighbour.from_json(n) for n in payload.get("neighbours") or []]
    if found:
        ctx.specialist.set_knowledge(found)
    outcomes = ctx.orchestrator.outcome_index()
    if outcomes is None:
        return
    for move, p in (payload.get("priors") or {}).items():
        outcomes.warm[move] = float(p["prior"])
        if p.get("mean_win_log") is not None:
            outcomes.warm_log[move] = float(p["mean_win_log"])
        outcomes.warm_notes[move] = {"records": p["records"], "wins": p["wins"], "failures": p["failures"],
                                     "flagged": p["flagged"], "base": p["base"]}
    for row in payload.get("by_path") or []:
        outcomes.warm_by_path[(tuple(row["path"]), row["move"])] = float(row["prior"])
    outcomes.recipes = [Recipe.from_json(r) for r in payload.get("recipes") or []]
    if (payload.get("priors") or outcomes.recipes) and ctx.index is not None:
        ctx.index.invalidate_priors(1e9)  # warm priors may exceed the bounds computed before


def _warm_payload(ctx: Context) -> dict | None:
    """Computed once from the knowledge store and kept as the ``warm_start`` event: priors and
    recipes for a Specialist with a move table (``move_priors``), the neighbours for any."""
    ks = open_knowledge(ctx)
    if ks is None:
        return None
    fp = _baseline_fingerprint(ctx)
    hw = hardware_class(fp)
    sig = signature(ctx)
    if "error" in sig:
        return None
    base = ctx.specialist.move_priors()
    records = ks.records(hardware_class=hw["class"])
    priors, by_path = warm_priors(records, hw["class"], sig, base, exclude_campaign=ctx.campaign.name) if base else ({}, {})
    found = recipes(records, hw["class"], sig, set(base), exclude_campaign=ctx.campaign.name) if base else []
    near = neighbours(records, hw["class"], sig, exclude_campaign=ctx.campaign.name)
    payload = {"hardware": hw, "signature": sig, "records": len(records),
               "priors": {k: v.to_json() for k, v in sorted(priors.items())},
               "by_path": [{"path": list(k[0]), "move": k[1], "prior": v} for k, v in sorted(by_path.items())],
               "recipes": [r.to_json() for r in found], "neighbours": [n.to_json() for n in near]}
    ctx.store.append_event(ctx.cid, "warm_start", payload, agent="knowledge")
    what = [f"{len(priors)} move priors"] * bool(priors) + [f"{len(found)} recipe{'s' * (len(found) != 1)}"] * bool(found)
    what += [f"a brief of {len(near)} similar problem{'s' * (len(near) != 1)}"] * bool(near)
    if what:
        ctx.report("sandbox_info", {"text": f"warm start: {', '.join(what)} from {len(records)} knowledge records "
                                          f"({hw['class']})"})
    return payload


# --- calibration ---------------------------------------------------------------------------
def calibration(store, cid: int) -> Calibration:  # type: ignore[no-untyped-def]
    """Brier score of P(accept) and error of the predicted log-speedup, per agent and family,
    from the campaign's knowledge records (or, for a campaign run before they existed, from its
    finished nodes)."""
    cal = Calibration()
    recs = campaign_records(store, cid)
    if recs:
        for r in recs:
            accepted = r.decision == "accept" and r.diagnosis == "improved"
            gain = r.speedup / (r.parent_speedup or 1.0) if r.speedup is not None else None  # vs its parent
            cal.add(r.agent, r.family, r.p_accept, accepted, log_or_none(r.predicted_gain), log_or_none(gain))
        return cal
    for n in store.nodes(cid, states=("accepted", "rejected", "failed")):
        if n.parent_id is None or n.move_id is None:
            continue
        accepted = n.state == "accepted" and n.diagnosis == "improved"
        cal.add(n.specialist, n.family, n.prior, accepted, log_or_none(n.predicted_gain),
                n.value if n.value is not None and math.isfinite(n.value) else None)
    return cal


def mark_final(ctx: Context, node_id: int, speedup: float | None) -> None:
    """The verified final best, for recipes and briefs (``KnowledgeStore.mark_final``)."""
    sha = ctx.store.get_node(node_id).artifact_sha
    evs = _events(ctx.store, ctx.cid, "knowledge_final")
    if evs and evs[-1].payload == {"artifact_sha": sha, "speedup": speedup}:
        return  # a finished campaign run again
    ctx.store.append_event(ctx.cid, "knowledge_final", {"artifact_sha": sha, "speedup": speedup},
                           node_id=node_id, agent="critic")
    ks = open_knowledge(ctx)
    if ks is not None:
        ks.mark_final(ctx.campaign.name, sha, speedup)


def after_campaign(ctx: Context, verification: dict | None) -> None:
    """Final verification found a best incorrect or hostile: revoke its records; it verified one:
    mark it. Then record the calibration table."""
    try:
        for v in (verification or {}).get("nodes", []):
            failed = v.get("failed") or ""
            if failed.split(":")[0] in INTEGRITY_FAILURES:
                revoke(ctx, ctx.store.get_node(v["node_id"]).artifact_sha, f"final verification: {failed[:200]}")
        if (verification or {}).get("best") is not None:
            mark_final(ctx, verification["best"], verification.get("speedup"))
        table = calibration(ctx.store, ctx.cid).to_json()
        if table["agents"]:
            ctx.store.append_event(ctx.cid, "calibration", table, agent="critic")
    except Exception as exc:  # noqa: BLE001 - advice only
        ctx.report("sandbox_info", {"text": f"calibration not recorded: {exc}"})

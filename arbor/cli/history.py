"""Read-side views of a campaign for the CLI (history, tree, show). Read-only by construction:
these functions only call the store's getters."""

from __future__ import annotations

import difflib
from dataclasses import asdict

from arbor.search_tree.records import NodeRecord
from arbor.search_tree.store import Store, StoreError
from arbor.search_tree.tree import best_path, build_stats


def node_row(n: NodeRecord) -> dict:
    return {
        "id": n.id, "parent": n.parent_id, "depth": n.depth, "state": n.state, "move": n.move_id,
        "speedup": n.speedup, "value": n.value, "diagnosis": n.diagnosis, "reason": n.reason,
        "prior": n.prior, "step": n.step, "artifact": n.artifact_sha,
        "created_at": n.created_at.isoformat() if n.created_at else None,
        "finished_at": n.finished_at.isoformat() if n.finished_at else None,
    }


def history(store: Store, campaign_id: int) -> list[dict]:
    return [node_row(n) for n in store.nodes(campaign_id)]


def tree_lines(store: Store, campaign_id: int) -> list[tuple[int, NodeRecord, bool]]:
    """(indent, node, on_best_path) in depth-first order."""
    nodes = store.nodes(campaign_id)
    stats = build_stats(nodes)
    from arbor.campaign.final_best import final_best  # the best `run`, `best`, `show` and the report name

    best = final_best(store, campaign_id, nodes).node
    on_path = set(best_path(stats, best.id)) if best else set()
    out: list[tuple[int, NodeRecord, bool]] = []
    roots = [n for n in nodes if n.parent_id is None]
    stack = [(0, r.id) for r in reversed(roots)]
    while stack:
        depth, nid = stack.pop()
        st = stats[nid]
        out.append((depth, st.node, nid in on_path))
        for child in reversed(st.children):
            stack.append((depth + 1, child))
    return out


def show(store: Store, node_id: int) -> dict:
    node = store.get_node(node_id)
    if node is None:
        raise StoreError(f"no node {node_id} — list them with `arbor history`")
    source = store.get_artifact(node.artifact_sha)
    diff = ""
    if node.parent_id is not None:
        parent = store.get_node(node.parent_id)
        diff = "".join(difflib.unified_diff(
            store.get_artifact(parent.artifact_sha).splitlines(keepends=True), source.splitlines(keepends=True),
            f"node {parent.id}", f"node {node.id}"))
    ms = []
    for m in store.measurements(node_id):
        d = asdict(m)
        d["created_at"] = m.created_at.isoformat() if m.created_at else None
        ms.append(d)
    vs = []
    for v in store.verdicts(node_id):
        d = asdict(v)
        d["created_at"] = v.created_at.isoformat()
        vs.append(d)
    from arbor.campaign.compile_times import of_node
    from arbor.campaign.profiling import profile_of

    proposed = [e for e in store.events(node.campaign_id, limit=1_000_000, kinds=["propose"]) if e.node_id == node_id]
    return {"node": node_row(node), "hypothesis": node.hypothesis, "source": source, "diff": diff,
            "measurements": ms, "compile": of_node(store.measurements(node_id)), "verdicts": vs,
            "profile": profile_of(store, node_id, node.campaign_id),
            "prior": node.prior, "predicted_gain": node.predicted_gain,
            "prior_from": prior_from(proposed[-1].payload if proposed else {}, node),
            "speed_of_light": _speed_of_light(store, node), "final_best": _final_figures(store, node)}


def _final_figures(store: Store, node: NodeRecord) -> str | None:
    """``7.339x verified, Critic value 6.014x`` when ``node`` is its campaign's final best."""
    from arbor.campaign.final_best import final_best

    final = final_best(store, node.campaign_id)
    return final.figures() if final.is_win and final.node is not None and final.node.id == node.id else None


def prior_from(payload: dict, node: NodeRecord) -> dict:
    """Where the node's prior came from, as its ``propose`` event recorded it: the skill's prior,
    the knowledge store's, and the factors outcomes applied (its family's shared posterior,
    calibration, profile aiming)."""
    if node.parent_id is None:
        return {"source": "baseline"}
    out = dict(payload.get("knowledge") or {"source": "skill"})
    if payload.get("prior_trace"):
        out["trace"] = payload["prior_trace"]
    return out


def _speed_of_light(store: Store, node: NodeRecord) -> dict | None:
    """The node's fraction of the campaign's speed of light (kernel targets with a known cost)."""
    from arbor.campaign.speed_of_light import node_seconds, reference_position

    camp = store.get_campaign(campaign_id=node.campaign_id)
    pos = reference_position(store, camp.root_node_id, node.id)
    if pos is None:
        return None
    t = node_seconds(store, node.id)
    shown, note = pos.reading(t)
    return {"fraction": shown, "note": note, "seconds": t, "floor_s": pos.seconds, "bound": pos.bound,
            "describe": pos.describe(), "advice": pos.advice()}

"""``arbor run --fork NEW``: a new campaign that reuses the old one's measurements where they
still mean the same thing.

A measurement depends on the artifact and on the measurement settings (target, measurement
protocol, sandbox) and on the problem; the Critic's thresholds, the objective and the skills only
change how it is judged or what is tried next. So when the problem and those settings are
unchanged, every node's first correct measurement is copied into the fork as a ``measured`` node
under the same parent — the fork's Critic judges it afresh on the next run (and asks for a
confirmation where its own rules want one); otherwise the fork starts fresh, and says so.
"""

from __future__ import annotations

from arbor.search_tree.store import Store

SETTINGS = ("target", "measurement", "sandbox")


def reusable(old: dict | None, new: dict) -> str | None:
    """None when measurements carry over, else why not (one phrase)."""
    if not old or not old.get("sections"):
        return "the old campaign recorded no fingerprints"
    if old.get("problem") != new.get("problem"):
        return "the problem file changed"
    changed = [k for k in SETTINGS if old["sections"].get(k) != new["sections"].get(k)]
    return f"the {', '.join(changed)} settings changed" if changed else None


def copy_measured(store: Store, source_id: int, target_id: int, owner: str) -> int:
    """Copy every node with a correct measurement (parents first) as a measured node of the
    target campaign; returns how many. Nodes whose parent was not copied are left out."""
    src = store.get_campaign(campaign_id=source_id)
    mapping: dict[int, int] = {}
    for n in sorted(store.nodes(source_id), key=lambda n: (n.depth, n.id)):
        if n.parent_id is not None and n.parent_id not in mapping:
            continue
        ok = next((m for m in store.measurements(n.id) if m.status == "ok"), None)
        if ok is None:
            continue
        new = store.add_node(target_id, n.artifact_sha, n.specialist,
                             parent_id=mapping.get(n.parent_id) if n.parent_id is not None else None,
                             move_id=n.move_id, family=n.family, hypothesis=n.hypothesis, prior=n.prior,
                             predicted_gain=n.predicted_gain, step=n.step)
        store.transition(new.id, "queued")
        store.start_running(new.id, owner)
        store.record_measurement(new.id, 1, "primary", {
            "status": ok.status, "baseline_samples": ok.baseline_samples, "candidate_samples": ok.candidate_samples,
            "stats": ok.stats, "correctness": ok.correctness, "fingerprint": ok.fingerprint,
            "duration_s": ok.duration_s}, ok.runner)
        mapping[n.id] = new.id
        if n.id == src.root_node_id:
            store.update_campaign(target_id, root_node_id=new.id)
    return len(mapping)

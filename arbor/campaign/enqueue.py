"""A user's own candidates in the tree: ``arbor enqueue`` (a file measured as a node on the next
run) and ``arbor retry`` (a node rejected as unstable measured again).

Both only add a ``proposed`` node; the next ``arbor run`` drains pending nodes before the
Orchestrator expands anything (``steps.select``), so the candidate goes through the same static
guard, sandbox, harness and Critic as any agent's. A retry's node is made in ``retry_node.py``.
"""

from __future__ import annotations

from arbor.search_tree.records import NodeRecord
from arbor.search_tree.store import Store, StoreError
from arbor.spec import CampaignSpec

from .retry_node import next_step


def open_for_write(spec: CampaignSpec) -> tuple[Store, object, object]:
    """(store, campaign, target) for a campaign file, creating the campaign and its baseline
    when it has never run; refuses a campaign whose spec/problem/skills changed."""
    from arbor.search_tree import open_store
    from arbor.targets import make_adapter

    from . import changes
    from .run import add_root

    target = make_adapter(spec)
    target.validate()
    store = open_store(spec.store_url())
    try:
        changes.check(store, spec)
        camp = store.get_or_create_campaign(spec.name, target.kind, spec.model_dump(mode="json"))
        changes.record(store, spec, camp.id)
        camp = add_root(store, camp, target)
    except BaseException:
        store.close()
        raise
    return store, camp, target


def _parent(store: Store, camp, parent: int | None) -> NodeRecord:
    node = store.get_node(parent if parent is not None else camp.root_node_id)
    if node is None or node.campaign_id != camp.id:
        raise StoreError(f"node {parent} is not a node of campaign {camp.name!r} — see `arbor history`")
    return node


def enqueue(store: Store, camp, target, source: str, label: str, parent: int | None = None) -> NodeRecord:
    par = _parent(store, camp, parent)
    sha = store.put_artifact(source, target.artifact_kind)
    known = store.find_node(camp.id, sha)
    if known is not None:
        raise StoreError(f"this exact candidate is already node {known.id} ({known.state}) — "
                         f"see `arbor show {known.id}`; use `arbor retry {known.id}` to measure it again")
    node = store.add_node(camp.id, sha, "user", parent_id=par.id, move_id=f"user:{label}", family="user",
                          hypothesis=f"the user's candidate {label}", step=next_step(store, camp.id))
    store.append_event(camp.id, "enqueue", {"file": label, "parent": par.id}, node_id=node.id, agent="user")
    return node

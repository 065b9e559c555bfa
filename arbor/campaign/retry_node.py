"""A node rejected for the machine's noise, measured again as a new node: ``arbor retry`` and the
campaign's own retry (``auto_retry.py``) share it. Apart from ``enqueue.py`` because that one
opens a campaign for writing (``run.add_root``), which the loop that retries must not import.

Finished nodes are immutable and a campaign holds one node per artifact, so a retry is a new node
whose artifact differs from the original only by trailing newlines (meaningless to Python and to
JSON, the two artifact kinds) and whose hypothesis names the node it retries.
"""

from __future__ import annotations

from arbor.search_tree.records import NodeRecord
from arbor.search_tree.store import Store, StoreError

RETRYABLE = {"unstable", "env_drift"}  # noise, not the candidate: worth measuring again
RETRY_OF = "retry of node"  # how a retry's hypothesis starts


def is_retry(node: NodeRecord) -> bool:
    return node.hypothesis.startswith(RETRY_OF)


def retry(store: Store, camp, target, node_id: int, by: str = "user") -> NodeRecord:
    """A new node of a node rejected for noise (``by``: "user" for ``arbor retry``, "critic" for the
    campaign's own retry, arbor/campaign/auto_retry.py)."""
    old = store.get_node(node_id)
    if old is None or old.campaign_id != camp.id:
        raise StoreError(f"node {node_id} is not a node of campaign {camp.name!r} — see `arbor history`")
    if old.parent_id is None:
        raise StoreError("the baseline cannot be retried — run the campaign with --restart instead")
    if old.state not in ("rejected", "failed") or old.diagnosis not in RETRYABLE:
        raise StoreError(f"node {node_id} is {old.state} ({old.diagnosis or 'no diagnosis'}); only a node "
                         f"rejected as {'/'.join(sorted(RETRYABLE))} is retried — enqueue a changed file instead")
    source = store.get_artifact(old.artifact_sha)
    for extra in range(1, 100):
        sha = store.put_artifact(source + "\n" * extra, target.artifact_kind)
        if store.find_node(camp.id, sha) is None:
            break
    node = store.add_node(camp.id, sha, by, parent_id=old.parent_id, move_id=old.move_id, family=old.family,
                          hypothesis=f"{RETRY_OF} {old.id} (was {old.diagnosis}): {old.hypothesis}",
                          step=next_step(store, camp.id))
    store.append_event(camp.id, "retry", {"of": old.id}, node_id=node.id, agent=by)
    return node


def next_step(store: Store, cid: int) -> int:
    return max((n.step for n in store.nodes(cid)), default=0) + 1

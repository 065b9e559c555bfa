"""Derived tree statistics (subtree best value, visit counts) from node records.

Values are never stored twice: the store keeps each node's own value, and this pass derives
what selection needs in O(nodes). Campaigns with very many nodes can cache the result between
steps; it only changes when a node finishes.
"""

from __future__ import annotations

from dataclasses import dataclass

from .records import NodeRecord


@dataclass
class NodeStats:
    node: NodeRecord
    children: list[int]
    subtree_best: float  # best value in the subtree (Q)
    visits: int  # nodes created in the subtree below this node (N)


def build_stats(nodes: list[NodeRecord]) -> dict[int, NodeStats]:
    by_id = {n.id: n for n in nodes}
    stats = {
        n.id: NodeStats(n, [], n.value if n.value is not None and n.state == "accepted" else float("-inf"), 0)
        for n in nodes
    }
    for n in nodes:
        if n.parent_id is not None and n.parent_id in stats:
            stats[n.parent_id].children.append(n.id)
    # children always have larger ids than parents: one reverse pass propagates upwards
    for n in sorted(nodes, key=lambda r: r.id, reverse=True):
        if n.parent_id is not None and n.parent_id in stats:
            parent, child = stats[n.parent_id], stats[n.id]
            parent.visits += 1 + child.visits
            parent.subtree_best = max(parent.subtree_best, child.subtree_best)
    del by_id
    return stats


def best_path(stats: dict[int, NodeStats], node_id: int) -> list[int]:
    path = []
    cur: int | None = node_id
    while cur is not None and cur in stats:
        path.append(cur)
        cur = stats[cur].node.parent_id
    return list(reversed(path))

"""A compact, prompt-sized view of the search tree (docs/architecture.md#agents): the target, the best path,
the top candidates, recent failures with their diagnoses (and the Critic's root-cause narrative
when there is one), and the current bottleneck profile when one has been recorded.

Built from store records only, so a resumed campaign's prompts see exactly what a fresh one
would have.
"""

from __future__ import annotations

import json
import math
from typing import Callable

from arbor.search_tree.records import NodeRecord, VerdictRecord

from .prompts import Section

FAILED = ("failed", "rejected")


def _speedup(n: NodeRecord) -> str:
    if n.state == "accepted" and n.value is not None:
        return f"{math.exp(n.value):.3f}x"
    return n.state


def _line(n: NodeRecord, width: int = 160) -> str:
    what = n.move_id or ("baseline" if n.parent_id is None else "candidate")
    hyp = " ".join(n.hypothesis.split())[:width]
    return f"#{n.id} [{what}] {_speedup(n)} — {hyp}"


def narrative_of(verdicts: list[VerdictRecord]) -> str | None:
    for v in reversed(verdicts):
        for g in v.gates or []:
            if isinstance(g, dict) and g.get("narrative"):
                return str(g["narrative"])
    return None


def best_node(nodes: list[NodeRecord]) -> NodeRecord | None:
    ok = [n for n in nodes if n.state == "accepted" and n.value is not None]
    return max(ok, key=lambda n: (n.value, -n.id)) if ok else None


def path_to(nodes: list[NodeRecord], node_id: int) -> list[NodeRecord]:
    by_id = {n.id: n for n in nodes}
    out = []
    cur = by_id.get(node_id)
    while cur is not None:
        out.append(cur)
        cur = by_id.get(cur.parent_id) if cur.parent_id is not None else None
    return list(reversed(out))


def tree_sections(nodes: list[NodeRecord], target: str, *,
                  verdicts_of: Callable[[int], list[VerdictRecord]] | None = None,
                  profile: dict | None = None, top_k: int = 5, failures: int = 5,
                  base_priority: int = 10) -> list[Section]:
    out = [Section("Target", target, base_priority, truncatable=False)]
    if not nodes:
        return out
    best = best_node(nodes)
    if best is not None:
        path = path_to(nodes, best.id)
        out.append(Section("Best path (baseline → current best)", "\n".join(_line(n) for n in path),
                           base_priority + 1))
        on_path = {n.id for n in path}
        top = sorted((n for n in nodes if n.state == "accepted" and n.value is not None and n.id not in on_path),
                     key=lambda n: -n.value)[:top_k]
        if top:
            out.append(Section("Other accepted candidates", "\n".join(_line(n) for n in top), base_priority + 20))
    bad = [n for n in nodes if n.state in FAILED and n.parent_id is not None]
    bad.sort(key=lambda n: (n.finished_at is not None, n.finished_at or n.created_at, n.id))
    lines = []
    for n in bad[-failures:][::-1]:
        text = f"#{n.id} (child of #{n.parent_id}) {n.state} {n.diagnosis}: {' '.join((n.reason or '').split())[:240]}"
        story = narrative_of(verdicts_of(n.id)) if verdicts_of else None
        if story:
            text += f"\n    root cause (Critic): {' '.join(story.split())[:400]}"
        lines.append(text)
    if lines:
        out.append(Section("Recent failures and rejections (newest first)", "\n".join(lines), base_priority + 5))
    if profile:
        out.append(Section("Current bottleneck profile", json.dumps(profile, sort_keys=True, default=str)[:3000],
                           base_priority + 8))
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n.state] = counts.get(n.state, 0) + 1
    out.append(Section("Tree", f"{len(nodes)} nodes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
                       base_priority + 25))
    return out

"""Reshaping move priors from outcomes (DESIGN §9, after Hyperloom).

Everything is derived from finished nodes in the store, so priors survive a crash and replay
exactly on resume: there is no hidden learner state to persist.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from arbor.search_tree.records import NodeRecord

CRASHES = {"compile_error", "runtime_error", "timeout", "oom", "hack_suspected", "harness_error"}
WIN_BOOST, MOVE_REGRESSION, FAMILY_REGRESSION = 1.5, 0.5, 0.7


@dataclass
class OutcomeIndex:
    family_wins: Counter = field(default_factory=Counter)
    move_regressions: Counter = field(default_factory=Counter)
    family_regressions: Counter = field(default_factory=Counter)
    crashed_below: dict[str, set[int]] = field(default_factory=dict)  # move -> parent ids
    parents: dict[int, int | None] = field(default_factory=dict)

    @classmethod
    def build(cls, nodes: list[NodeRecord]) -> "OutcomeIndex":
        idx = cls()
        for n in nodes:
            idx.parents[n.id] = n.parent_id
            if n.move_id is None:
                continue
            if n.state == "accepted" and n.diagnosis == "improved" and n.family:
                idx.family_wins[n.family] += 1
            elif n.diagnosis == "regression":
                idx.move_regressions[n.move_id] += 1
                if n.family:
                    idx.family_regressions[n.family] += 1
            elif n.diagnosis in CRASHES and n.parent_id is not None:
                idx.crashed_below.setdefault(n.move_id, set()).add(n.parent_id)
        return idx

    def ancestors(self, node_id: int) -> set[int]:
        out = set()
        cur: int | None = node_id
        while cur is not None:
            out.add(cur)
            cur = self.parents.get(cur)
        return out

    def adjust(self, move_id: str, family: str | None, base: float, parent_id: int) -> float:
        """The move's prior below ``parent_id`` given everything seen so far."""
        crashed = self.crashed_below.get(move_id)
        if crashed and crashed & self.ancestors(parent_id):
            return 0.0
        p = base
        if family:
            p *= WIN_BOOST ** min(self.family_wins[family], 2)
            p *= FAMILY_REGRESSION ** (self.family_regressions[family] - self.move_regressions[move_id])
        p *= MOVE_REGRESSION ** self.move_regressions[move_id]
        return min(p, 1.0)

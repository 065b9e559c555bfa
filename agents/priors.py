"""Reshaping move priors from outcomes (docs/architecture.md#scoring, after Hyperloom).

Everything is derived from finished nodes in the store, so priors survive a crash and replay
exactly on resume: there is no hidden learner state to persist. The index is fed one finished
node at a time (``observe``), so it costs O(1) per outcome instead of a pass over the tree.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from arbor.agents.knowledge.calibration import Tally, shrink, shrink_weight
from arbor.search_tree.records import NodeRecord

CRASHES = {"compile_error", "runtime_error", "timeout", "oom", "hack_suspected", "harness_error",
           "startup_failed", "accuracy_regression"}  # serving: the config will not start / changes outputs
WIN_BOOST, MOVE_REGRESSION, FAMILY_REGRESSION = 1.5, 0.5, 0.7
MAX_BOOSTED_WINS = 2
# Below a node that won by setting a knob, another value of that same knob replaces the win
# instead of building on it: such moves are alternatives, tried after the complementary ones.
# (Measured on the recorded landscapes: the family boost alone made "STATS=var_mean" outrank
# every complementary move right after "STATS=fused" had won.)
ALTERNATIVE_TO_WIN = 0.5


def knob_of(move) -> str | None:  # type: ignore[no-untyped-def]
    """The single knob a move sets (template constants, serving knobs); None for code transforms."""
    if move.transform.startswith(("const_", "knob_")):
        name = move.params.get("knob", move.params.get("name"))
        return name if isinstance(name, str) else None
    return None


def alternative_to_win(move, parent: NodeRecord, moves_by_id: dict) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``move`` sets the knob whose change made ``parent`` an accepted win."""
    won_by = moves_by_id.get(parent.move_id) if parent.diagnosis == "improved" else None
    knob = knob_of(won_by) if won_by is not None else None
    return knob is not None and knob_of(move) == knob


@dataclass
class OutcomeIndex:
    family_wins: Counter = field(default_factory=Counter)
    move_regressions: Counter = field(default_factory=Counter)
    family_regressions: Counter = field(default_factory=Counter)
    crashed_below: dict[str, set[int]] = field(default_factory=dict)  # move -> parent ids
    ancestors_of: Callable[[int], set[int]] | None = None
    _parents: dict[int, int | None] = field(default_factory=dict)
    # Warm start: priors from records of similar problems (move id -> prior replacing the
    # skill's), and the expected log-speedup of a move when it wins there.
    warm: dict[str, float] = field(default_factory=dict)
    warm_log: dict[str, float] = field(default_factory=dict)
    warm_notes: dict[str, dict] = field(default_factory=dict)
    warm_by_path: dict[tuple, float] = field(default_factory=dict)  # (moves applied, move) -> prior
    _move_of: dict[int, str | None] = field(default_factory=dict)
    # Calibration of P(accept) per family, from this campaign's finished nodes: a family whose
    # priors predicted badly is shrunk toward its observed acceptance rate.
    calibration: dict[str, Tally] = field(default_factory=dict)

    @classmethod
    def build(cls, nodes: list[NodeRecord]) -> "OutcomeIndex":
        idx = cls()
        for n in nodes:
            idx._parents[n.id] = n.parent_id
            idx.observe(n)
        return idx

    def observe(self, n: NodeRecord) -> float | None:
        """Record one finished node. Returns the factor by which any prior may have *risen*
        (1.0 when priors can only have fallen), or None when nothing changed."""
        self._move_of[n.id] = n.move_id
        self._parents.setdefault(n.id, n.parent_id)
        if n.move_id is None:
            return None
        rise = self._calibrate(n)
        if n.state == "accepted" and n.diagnosis == "improved" and n.family:
            self.family_wins[n.family] += 1
            return max(rise or 1.0, WIN_BOOST if self.family_wins[n.family] <= MAX_BOOSTED_WINS else 1.0)
        if n.diagnosis == "regression":
            self.move_regressions[n.move_id] += 1
            if n.family:
                self.family_regressions[n.family] += 1
            return rise or 1.0
        if n.diagnosis in CRASHES and n.parent_id is not None:
            self.crashed_below.setdefault(n.move_id, set()).add(n.parent_id)
            return rise or 1.0
        return rise

    def _calibrate(self, n: NodeRecord) -> float | None:
        """Score the node's prior (its P(accept)) against its outcome; a rise factor that makes
        every bound 1 when the family's priors are (now) being shrunk, since shrinking pulls low
        priors up toward the observed rate."""
        if n.state not in ("accepted", "rejected", "failed") or not n.family:
            return None
        tally = self.calibration.setdefault(n.family, Tally())
        tally.add(n.prior, n.state == "accepted" and n.diagnosis == "improved", None, None)
        return 1e9 if shrink_weight(tally) < 1.0 else None

    def warm_prior(self, move_id: str, parent_id: int | None = None) -> float | None:
        """The knowledge prior of ``move_id`` below ``parent_id``: what followed the same moves
        on similar problems when recorded, else the move's prior on similar problems."""
        if self.warm_by_path and parent_id is not None:
            path = tuple(sorted(m for m in (self._move_of.get(a) for a in self.ancestors(parent_id)) if m))
            hit = self.warm_by_path.get((path, move_id))
            if hit is not None:
                return hit
        return self.warm.get(move_id)

    def warm_note(self, move_id: str, parent_id: int | None = None) -> dict | None:
        """Where the move's prior came from, when it came from the knowledge store."""
        p = self.warm_prior(move_id, parent_id)
        if p is None:
            return None
        return {"source": "knowledge", **self.warm_notes.get(move_id, {}), "prior": round(p, 4)}

    def ancestors(self, node_id: int) -> set[int]:
        if self.ancestors_of is not None:
            return self.ancestors_of(node_id)
        out, cur = set(), node_id
        while cur is not None:
            out.add(cur)
            cur = self._parents.get(cur)
        return out

    def adjust(self, move_id: str, family: str | None, base: float, parent_id: int) -> float:
        """The move's prior below ``parent_id`` given everything seen so far."""
        crashed = self.crashed_below.get(move_id)
        if crashed and crashed & self.ancestors(parent_id):
            return 0.0
        p = self.warm_prior(move_id, parent_id)
        p = base if p is None else p
        if family:
            p = shrink(p, self.calibration.get(family))
            p *= WIN_BOOST ** min(self.family_wins[family], MAX_BOOSTED_WINS)
            p *= FAMILY_REGRESSION ** (self.family_regressions[family] - self.move_regressions[move_id])
        p *= MOVE_REGRESSION ** self.move_regressions[move_id]
        return min(p, 1.0)

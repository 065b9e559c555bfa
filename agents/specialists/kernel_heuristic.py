"""Offline kernel Specialist: applies skill-declared moves to a parent's ModelNew source.

Deterministic for a seed: candidates are ordered by adjusted prior, ties broken by a seeded
shuffle. Transforms are pure functions of the source, so their results are cached by
(source sha, move id) and each is computed once per process.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from arbor.agents.priors import ALTERNATIVE_TO_WIN, OutcomeIndex, alternative_to_win
from arbor.agents.profile_aim import aim_factor
from arbor.agents.skills import MoveSpec
from arbor.agents.transforms import apply_move
from arbor.search_tree.records import NodeRecord
from arbor.search_tree.store import artifact_sha


@dataclass(frozen=True)
class Proposal:
    source: str
    move_id: str
    family: str | None
    hypothesis: str
    prior: float
    predicted_gain: float | None


@dataclass(frozen=True)
class Option:
    move: MoveSpec
    source: str
    prior: float


class HeuristicKernelSpecialist:
    name = "kernel-heuristic"

    def __init__(self, moves: list[MoveSpec], seed: int = 0):
        self.moves = list(moves)
        self.by_id = {m.id: m for m in self.moves}
        self.seed = seed
        self._cache: dict[tuple[str, str], str | None] = {}
        self.profile: dict | None = None  # latest bottleneck profile (baseline or best), set by the loop

    def set_profile(self, profile: dict | None) -> None:
        """Aim at the profiled bottleneck: moves that cannot touch the dominant ops rank low."""
        self.profile = profile

    def _apply(self, parent_sha: str, parent_source: str, move: MoveSpec) -> str | None:
        key = (parent_sha, move.id)
        if key not in self._cache:
            try:
                self._cache[key] = apply_move(parent_source, move.transform, move.params)
            except Exception:  # a transform that cannot handle this source is simply not applicable
                self._cache[key] = None
        return self._cache[key]

    def prior(self, move: MoveSpec, parent: NodeRecord, tried: set[str], outcomes: OutcomeIndex) -> float:
        """The move's prior below ``parent`` from outcomes so far (0: tried, or ruled out)."""
        if move.id in tried:
            return 0.0
        prior = outcomes.adjust(move.id, move.family, move.prior, parent.id)
        if prior > 0 and alternative_to_win(move, parent, self.by_id):
            prior *= ALTERNATIVE_TO_WIN
        return prior * aim_factor(move, self.profile)

    def options(self, parent: NodeRecord, parent_source: str, tried: set[str],
                is_known: Callable[[str], bool], outcomes: OutcomeIndex) -> list[Option]:
        """Untried moves at ``parent`` with their adjusted priors, best first. A move whose
        result is already in the tree (reached by another path) counts as tried."""
        out = []
        for move in self.moves:
            prior = self.prior(move, parent, tried, outcomes)
            if prior <= 0:
                continue
            new = self._apply(parent.artifact_sha, parent_source, move)
            if new is None or is_known(artifact_sha(new)):
                continue
            out.append(Option(move, new, prior))
        rng = random.Random(f"{self.seed}:{parent.id}")
        rng.shuffle(out)
        out.sort(key=lambda o: -o.prior)  # stable: equal priors keep the seeded order
        return out

    def propose(self, parent: NodeRecord, options: list[Option], k: int = 1) -> list[Proposal]:
        proposals = []
        for opt in options[:k]:
            what = opt.move.description or opt.move.transform
            proposals.append(Proposal(
                source=opt.source,
                move_id=opt.move.id,
                family=opt.move.family,
                hypothesis=f"{opt.move.id} on node {parent.id}: {what}",
                prior=opt.prior,
                predicted_gain=opt.prior,
            ))
        return proposals

"""Offline kernel Specialist: applies skill-declared AST moves to a parent's ModelNew source.

Every applicable, untried move is offered (the shared behaviour of ``HeuristicSpecialist``);
whether a rewrite is legal for this source is the transform's own decision. What it adds: aim at
the bottleneck profile — a move that cannot touch the ops that take the time ranks low.
"""

from __future__ import annotations

from arbor.agents.priors import OutcomeIndex, PriorTrace
from arbor.agents.profile_aim import aim_factor
from arbor.agents.skills import MoveSpec
from arbor.search_tree.records import NodeRecord

from .heuristic import HeuristicSpecialist


class HeuristicKernelSpecialist(HeuristicSpecialist):
    name = "kernel-heuristic"

    def __init__(self, moves: list[MoveSpec], seed: int = 0):
        super().__init__(moves, seed)
        self.profile: dict | None = None  # latest bottleneck profile (baseline or best), set by the loop

    def set_profile(self, profile: dict) -> None:
        """Aim at the profiled bottleneck: moves that cannot touch the dominant ops rank low."""
        self.profile = profile

    def prior_trace(self, move: MoveSpec, parent: NodeRecord, tried: set[str],
                    outcomes: OutcomeIndex) -> PriorTrace | None:
        t = super().prior_trace(move, parent, tried, outcomes)
        if t is not None and t.value > 0:
            t.scale("cannot touch the profiled bottleneck", aim_factor(move, self.profile))
        return t

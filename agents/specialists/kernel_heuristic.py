"""Offline kernel Specialist: applies skill-declared AST moves to a parent's ModelNew source.

Every applicable, untried move is offered (the shared behaviour of ``HeuristicSpecialist``);
whether a rewrite is legal for this source is the transform's own decision. What it adds:

- a move's ``when:`` condition over the campaign, the traced reference and the latest profile
  (``kernel_facts.FACTS``: a CUDA graph only where the problem is launch-bound, a conv move only
  where there is a convolution): false, the move is not offered; unknown, it is offered at half
  its prior;
- aim at the bottleneck profile — a move that cannot touch the ops that take the time, or whose
  ops already run near the device's peak, ranks low (``profile_aim``).
"""

from __future__ import annotations

from typing import Callable

from arbor.agents.priors import OutcomeIndex, PriorTrace
from arbor.agents.profile_aim import OFF_TARGET, aim_factor
from arbor.agents.skills import MoveSpec, SkillError
from arbor.search_tree.records import NodeRecord

from .conditions import Condition, ConditionError, compile_condition
from .heuristic import UNKNOWN_FACTOR, HeuristicSpecialist
from .kernel_facts import FACTS, profile_facts

# How much a new profile can raise a move's prior: off target to on target, and a condition that
# was unknown (no profile yet) becoming true.
MAX_PROFILE_RISE = 1.0 / (OFF_TARGET * UNKNOWN_FACTOR)


class HeuristicKernelSpecialist(HeuristicSpecialist):
    name = "kernel-heuristic"

    def __init__(self, moves: list[MoveSpec], seed: int = 0, facts: Callable[[], dict] | None = None):
        """``facts``: called once, on the first expansion, for what the campaign and its traced
        reference say (``kernel_facts.reference_facts`` plus device and precision)."""
        super().__init__(moves, seed)
        self.profile: dict | None = None  # latest bottleneck profile (baseline or best), set by the loop
        self._facts_of = facts or (lambda: {})
        self._facts: dict | None = None
        for m in self.moves:
            if not m.when:
                continue
            try:
                cond = compile_condition(m.when)
            except ConditionError as err:
                raise SkillError(f"move {m.id}", "when", f"{m.when!r}: {err}",
                                 "write a comparison such as \"'conv' in kinds and device == 'cuda'\"") from None
            unknown = sorted(cond.names - set(FACTS) - {"true", "false", "True", "False"})
            if unknown:
                raise SkillError(f"move {m.id}", "when", f"{m.when!r} reads {', '.join(unknown)}, which a kernel "
                                 "condition cannot know", f"use names from: {', '.join(FACTS)}")
            self.conditions[m.id] = cond

    def set_profile(self, profile: dict) -> None:
        """Aim at the profiled bottleneck: moves that cannot touch the dominant ops rank low."""
        self.profile = profile

    def facts(self) -> dict:
        """The names a move's condition reads: campaign and reference (computed once), then the
        latest profile."""
        if self._facts is None:
            try:
                self._facts = dict(self._facts_of())
            except Exception:  # noqa: BLE001 - facts are advice: unknown, never a failed campaign
                self._facts = {}
        return {**self._facts, **profile_facts(self.profile)}

    def env(self, parent: NodeRecord, parent_source: str) -> dict | None:
        return self.facts() if self.conditions else None

    def prior_trace(self, move: MoveSpec, parent: NodeRecord, tried: set[str],
                    outcomes: OutcomeIndex) -> PriorTrace | None:
        t = super().prior_trace(move, parent, tried, outcomes)
        if t is not None and t.value > 0:
            t.scale("cannot touch the profiled bottleneck", aim_factor(move, self.profile))
        return t

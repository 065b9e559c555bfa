"""Heuristic Orchestrator: picks the frontier node to expand and hands it to a Specialist.

It cannot accept anything (only the Critic writes accept verdicts); it only reads the tree.
Expandable nodes are the baseline and accepted nodes that still have untried moves.

Selection runs on the incremental ``TreeIndex``: the policy scores every expandable node from
prior *bounds*, and only the current winner's untried moves are actually computed (transforms are
cached per artifact). When the exact prior lowers the winner's score, we score again; the loop
ends when the winner is exact, which is the node an exhaustive pass would have chosen.
"""

from __future__ import annotations

import random
from typing import Callable

import numpy as np

from arbor.agents.contracts import Orchestrator, Selection, Specialist
from arbor.agents.priors import OutcomeIndex
from arbor.search_tree.index import TreeIndex
from arbor.search_tree.policies import Policy
from arbor.search_tree.records import NodeRecord

from . import schedule_space

MAX_ROUNDS = 10_000
# Exact priors computed per selection before settling for the best exact candidate found so far.
# After a family win raises every bound in a tree of 1e5 nodes, an exhaustive pass needed over a
# thousand exact priors (1-3 s per step, cold caches); capped, a step stays bounded and the
# remaining candidates are made exact in later steps as their bounds come up.
MAX_EXACT = 16


class HeuristicOrchestrator(Orchestrator):
    name = "orchestrator-heuristic"

    def __init__(self, policy: Policy, specialist: Specialist, seed: int = 0, family_posterior: bool = True):
        self.policy = policy
        self.specialist = specialist
        self.seed = seed
        self.outcomes = OutcomeIndex(family_posterior=family_posterior)
        self._rise: float | None = None
        self._index: TreeIndex | None = None
        self._seen: dict[int, NodeRecord] = {}  # finished nodes a schedule search reads (schedule_space.py)
        self._schedule_moves = set(schedule_space.schedule_moves(specialist))

    def attach(self, index: TreeIndex) -> None:
        """Follow ``index``: every finished node it learns about updates the outcome priors."""
        if self._index is index:
            return
        self._index = index
        self.outcomes.ancestors_of = index.ancestors
        self.outcomes.best_of = lambda: _best(index)
        index.on_finish.append(self._observe)

    follow = attach

    def outcome_index(self) -> OutcomeIndex:
        return self.outcomes

    def priors_may_rise(self, factor: float) -> None:
        """Something outside the outcomes (a new bottleneck profile) may raise priors by ``factor``."""
        self._rise = max(self._rise or 1.0, factor)

    def _observe(self, node: NodeRecord) -> None:
        if schedule_space.worth_keeping(node, self._schedule_moves):
            self._seen[node.id] = node
        rise = self.outcomes.observe(node)
        if rise is not None:
            self._rise = max(self._rise or 1.0, rise)

    def select(self, index: TreeIndex, source_of: Callable[[str], str], is_known: Callable[[str], bool],
               step: int) -> Selection | None:
        if self._index is not index:
            self.attach(index)
        if self._rise is not None:  # outcomes changed since the last step: bounds again
            index.invalidate_priors(self._rise)
            self._rise = None
        if index.focus is None and (forced := self._overlap_test(index, source_of, is_known)) is not None:
            return forced
        rng = random.Random(f"{self.seed}:select:{step}")
        rows, q, value, visits, pv, prior = index.candidate_arrays()
        if len(rows) == 0:
            return None
        # Scores are computed once; each round changes one entry's prior, so only that entry is
        # re-scored (a full pass per round cost seconds at 1e5 nodes after a family win raised
        # every bound).
        prior = np.array(prior, dtype=float)
        total = int(np.max(pv))
        scores = np.array(self.policy.scores(q, value, visits, pv, prior, total, rng), dtype=float)
        fallback: tuple[float, int, list] | None = None  # (exact score, entry, options) of the best seen
        for rounds in range(MAX_ROUNDS):
            top_score = scores.max()
            if top_score == -np.inf:
                return None
            if rounds >= MAX_EXACT and fallback is not None:
                i, options = fallback[1], fallback[2]
                node = index.node(int(rows[i]))
                return Selection(node, options, f"{self.policy.name}: node {node.id} (Q={q[i]:.3f}, "
                                 f"N={int(visits[i])}, P={prior[i]:.2f}, best of {MAX_EXACT} exact priors)")
            top = np.flatnonzero(scores >= top_score - 1e-12)
            i = int(top[0]) if len(top) == 1 else int(top[rng.randrange(len(top))])
            row = int(rows[i])
            node = index.node(row)
            options = self.specialist.options(node, source_of(node.artifact_sha), index.tried.get(row, set()),
                                              is_known, self.outcomes)
            best_prior = options[0].prior if options else 0.0
            was = prior[i]
            index.set_prior(row, best_prior)
            best_prior *= index.confidence(row)  # below 1 for a node expanded before its verdict
            if options and best_prior >= was - 1e-12:
                note = (f"{self.policy.name}: node {node.id} (Q={q[i]:.3f}, N={int(visits[i])}, "
                        f"P={best_prior:.2f}, {len(rows)} expandable)")
                return Selection(node, options, note)
            prior[i] = best_prior
            one = slice(i, i + 1)
            scores[i] = (self.policy.scores(q[one], value[one], visits[one], pv[one], prior[one], total, rng)[0]
                         if options else -np.inf)
            if options and (fallback is None or scores[i] > fallback[0]):
                fallback = (float(scores[i]), i, options)
        return None

    def schedule_space(self, index: TreeIndex, source_of: Callable[[str], str], is_known: Callable[[str], bool],
                       left: float | None, bound: str | None) -> tuple[Selection | None, str]:
        """The fixed moves are spent: the schedule space of the best node or of the most
        promising rejected generated candidate (``schedule_space.py``)."""
        if self._index is not index:
            self.attach(index)
        return schedule_space.select(index, self.specialist, self.outcomes, source_of, is_known,
                                     schedule_space.Headroom(left, bound), self._seen)

    def _overlap_test(self, index: TreeIndex, source_of: Callable[[str], str],
                      is_known: Callable[[str], bool]) -> Selection | None:
        """A move that gained nothing right after a win, yet is expected to gain more than that win
        did, is measured alone at the win's parent before anything else is selected
        (``OutcomeIndex.overlap_tests``): one evaluation says whether the win took its gain. PUCT
        would not get there: by then the parent's visits shrink its exploration term below its
        children's at any prior (a warm Conv+Mish+GroupNorm campaign kept growing the 1.16x
        graph-algebra branch while compile-default alone, 1.30x at the root, waited at prior 0.5)."""
        for over in self.outcomes.overlap_tests():
            row = index.row_of.get(over.parent)
            node = index.node(row) if row is not None else None
            tried = index.tried.get(row, set()) if row is not None else set()
            if node is None or over.move in tried:
                continue
            options = self.specialist.options(node, source_of(node.artifact_sha), tried, is_known, self.outcomes)
            first = [o for o in options if o.move.id == over.move]
            if not first:  # not offered there (gated, or its result is in the tree already)
                continue
            note = (f"overlap test: {over.move} gained {over.gain:.3f}x after {over.won_by} won "
                    f"{over.won:.3g}x at node {over.parent} (node {over.child}); measured alone at node {over.parent}")
            return Selection(node, first + [o for o in options if o.move.id != over.move], note)
        return None


def _best(index: TreeIndex) -> tuple[int, float] | None:
    """The best accepted node and its speedup (``OutcomeIndex.dominated``)."""
    best = index.best()
    if best is None or best.parent_id is None:  # the baseline dominates nothing
        return None
    return best.id, index.best_speedup()

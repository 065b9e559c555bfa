"""Heuristic Orchestrator: picks the frontier node to expand and hands it to a Specialist.

It cannot accept anything (only the Critic writes accept verdicts); it only reads the tree.
Expandable nodes are the baseline and accepted nodes that still have untried moves.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from arbor.agents.priors import OutcomeIndex
from arbor.agents.specialists.kernel_heuristic import HeuristicKernelSpecialist, Option
from arbor.search_tree.policies import Candidate, Policy
from arbor.search_tree.records import NodeRecord
from arbor.search_tree.tree import build_stats


@dataclass
class Selection:
    parent: NodeRecord
    options: list[Option]
    score_note: str


class HeuristicOrchestrator:
    name = "orchestrator-heuristic"

    def __init__(self, policy: Policy, specialist: HeuristicKernelSpecialist, seed: int = 0):
        self.policy = policy
        self.specialist = specialist
        self.seed = seed

    def select(self, nodes: list[NodeRecord], source_of: Callable[[str], str], step: int) -> Selection | None:
        stats = build_stats(nodes)
        outcomes = OutcomeIndex.build(nodes)
        known = {n.artifact_sha for n in nodes}
        cands: list[Candidate] = []
        opts: dict[int, list[Option]] = {}
        for n in nodes:
            if n.state != "accepted":
                continue
            st = stats[n.id]
            children = [stats[c].node for c in st.children]
            options = self.specialist.options(n, source_of(n.artifact_sha), children, known, outcomes)
            if not options:
                continue
            opts[n.id] = options
            parent_visits = stats[n.parent_id].visits if n.parent_id in stats else st.visits
            q = max(st.subtree_best, n.value or 0.0)
            cands.append(Candidate(n.id, q, n.value or 0.0, st.visits, parent_visits,
                                   options[0].prior, n.depth))
        if not cands:
            return None
        rng = random.Random(f"{self.seed}:select:{step}")
        chosen = self.policy.choose(cands, rng)
        note = f"{self.policy.name}: node {chosen.node_id} (Q={chosen.q:.3f}, N={chosen.visits}, P={chosen.prior:.2f})"
        return Selection(stats[chosen.node_id].node, opts[chosen.node_id], note)

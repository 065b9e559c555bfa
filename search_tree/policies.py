"""Selection policies: which expandable node to grow next.

Each policy scores candidates from derived statistics only, so the same object drives live
campaigns, replayed landscapes and benchmarks. PUCT (the default; docs/architecture.md#scoring):
``Q + c·P·sqrt(N_parent)/(1+N)`` where ``P`` is the best prior among the node's untried moves,
so a node whose remaining ideas were all demoted by failures stops attracting expansions.
"""

from __future__ import annotations

import math
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Candidate:
    node_id: int
    q: float  # best value in its subtree (log speedup), 0 for the baseline
    value: float  # its own value
    visits: int  # expansions below it
    parent_visits: int  # expansions below its parent (the total for the root)
    prior: float  # best prior of its untried moves
    depth: int


class Policy(ABC):
    name: str

    @abstractmethod
    def score(self, c: Candidate, total: int) -> float: ...

    def scores(self, q, value, visits, parent_visits, prior, total: int, rng: random.Random) -> np.ndarray:
        """Vectorised ``score`` over arrays (the tree index path); same formula."""
        return np.array([self.score(Candidate(i, q[i], value[i], int(visits[i]), int(parent_visits[i]),
                                              prior[i], 0), total) for i in range(len(q))])

    def choose_index(self, q, value, visits, parent_visits, prior, rng: random.Random) -> int:
        """Position of the best-scoring entry; exact ties broken by the seeded rng."""
        total = int(np.max(parent_visits)) if len(parent_visits) else 0
        s = self.scores(q, value, visits, parent_visits, prior, total, rng)
        top = np.flatnonzero(s >= s.max() - 1e-12)
        return int(top[0]) if len(top) == 1 else int(top[rng.randrange(len(top))])

    def choose(self, candidates: list[Candidate], rng: random.Random) -> Candidate:
        if not candidates:
            raise ValueError("no expandable node")
        total = max(c.parent_visits for c in candidates)
        best = max(self.score(c, total) for c in candidates)
        ties = [c for c in candidates if math.isclose(self.score(c, total), best, rel_tol=1e-12, abs_tol=1e-12)]
        ties.sort(key=lambda c: c.node_id)
        return ties[0] if len(ties) == 1 else rng.choice(ties)


class PUCT(Policy):
    name = "puct"

    def __init__(self, exploration: float = 1.0):
        self.c = exploration

    def score(self, c: Candidate, total: int) -> float:
        n_parent = max(c.parent_visits, 1)
        return c.q + self.c * c.prior * math.sqrt(n_parent) / (1 + c.visits)

    def scores(self, q, value, visits, parent_visits, prior, total, rng):
        return q + self.c * prior * np.sqrt(np.maximum(parent_visits, 1)) / (1 + visits)


class UCB1(Policy):
    name = "ucb1"

    def __init__(self, exploration: float = 1.0):
        self.c = exploration

    def score(self, c: Candidate, total: int) -> float:
        return c.q + self.c * math.sqrt(math.log(max(total, 2)) / (1 + c.visits))

    def scores(self, q, value, visits, parent_visits, prior, total, rng):
        return q + self.c * np.sqrt(math.log(max(total, 2)) / (1 + visits))


class Greedy(Policy):
    """Best-first: always grow the best node; priors only break ties."""

    name = "greedy"

    def score(self, c: Candidate, total: int) -> float:
        return c.value + 1e-6 * c.prior

    def scores(self, q, value, visits, parent_visits, prior, total, rng):
        return value + 1e-6 * prior


class RandomPolicy(Policy):
    name = "random"

    def score(self, c: Candidate, total: int) -> float:
        return 0.0

    def choose(self, candidates: list[Candidate], rng: random.Random) -> Candidate:
        if not candidates:
            raise ValueError("no expandable node")
        return rng.choice(sorted(candidates, key=lambda c: c.node_id))

    def scores(self, q, value, visits, parent_visits, prior, total, rng):
        return np.zeros(len(q))


def make_policy(name: str, exploration: float = 1.0) -> Policy:
    if name == "puct":
        return PUCT(exploration)
    if name == "ucb1":
        return UCB1(exploration)
    if name == "greedy":
        return Greedy()
    if name == "random":
        return RandomPolicy()
    raise ValueError(f"unknown policy '{name}': use one of puct, ucb1, greedy, random")

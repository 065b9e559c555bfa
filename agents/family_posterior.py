"""One move family's shared posterior (docs/architecture.md#scoring): how alike its members'
measured log-speedups are (``FamilyModel``), and what a family's measurements say about a member
below a parent (``FamilyPosterior``, a small Gaussian process over (member, parent) pairs).
``agents/priors.py`` turns that into move priors."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

@dataclass(frozen=True)
class FamilyModel:
    """How alike two measured log-speedups (over their parents) of one family are.

    The covariance of (member m, parent p) and (m', p') is ``family_sd^2`` (what every member
    shares, below any parent) + ``context_sd^2`` when p = p' (what the family does to this
    particular parent) + ``member_sd^2`` when m = m' (a member's own departure from its family);
    each measurement adds ``noise_sd^2``. So siblings below the same parent correlate at ~0.95,
    the same family below another parent at ~0.7. Calibrated on the development set's compile
    variants (five within 2% of each other on Softmax) and graph passes; a family whose members
    really differ should be split into two families in its skill file."""

    mean: float = 0.0  # log-speedup a move is expected to have before anything is measured
    family_sd: float = 0.25
    context_sd: float = 0.08
    member_sd: float = 0.05
    noise_sd: float = 0.03
    win_log: float = math.log(1.02)  # what a move must gain over its parent to count as a win
    window: int = 16  # observations kept per kind (same parent, same member, latest) per prediction

    @property
    def prior_var(self) -> float:
        return self.family_sd ** 2 + self.context_sd ** 2 + self.member_sd ** 2

    def cov(self, moves_a: np.ndarray, parents_a: np.ndarray, moves_b: np.ndarray, parents_b: np.ndarray) -> np.ndarray:
        """The covariance matrix between (member, parent) pairs (members and parents as int codes)."""
        return (self.family_sd ** 2 + self.context_sd ** 2 * (parents_a[:, None] == parents_b[None, :])
                + self.member_sd ** 2 * (moves_a[:, None] == moves_b[None, :]))

    def p_win(self, mean: float, var: float) -> float:
        """P(the measured log-speedup of a move clears ``win_log``)."""
        z = (mean - self.win_log) / math.sqrt(var + self.noise_sd ** 2)
        return 0.5 * math.erfc(-z / math.sqrt(2.0))

    @property
    def p_win_prior(self) -> float:
        return self.p_win(self.mean, self.prior_var)


DEFAULT_MODEL = FamilyModel()


@dataclass(frozen=True)
class Observation:
    move: str
    parent: int
    node: int
    log_gain: float  # log(node's speedup / its parent's)


# A family's own spreads, picked by marginal likelihood from its measurements, with a prior that
# favours alike members: one measurement keeps the defaults (Softmax's compile variants pool
# fully), while a family whose members measure far apart (compile-default 0.88x, compile-freezing
# 1.3x) learns that it is heterogeneous, so one member's win no longer lifts a sibling whose own
# measurements say otherwise. (spread, log prior weight)
MEMBER_GRID = ((0.05, 0.0), (0.15, -1.5), (0.35, -3.0))
CONTEXT_GRID = ((0.08, 0.0), (0.2, -1.5))
FIT_WINDOW = 32


@dataclass
class FamilyPosterior:
    """One family's measured members, and what they say about a member below a parent."""

    base: FamilyModel = DEFAULT_MODEL
    obs: list[Observation] = field(default_factory=list)
    _by_parent: dict[int, list[int]] = field(default_factory=dict)
    _by_move: dict[str, list[int]] = field(default_factory=dict)
    _cache: dict[tuple[str, int], tuple[float, float]] = field(default_factory=dict)
    _codes: dict[str, int] = field(default_factory=dict)
    _fitted: FamilyModel | None = None

    def add(self, o: Observation) -> None:
        i = len(self.obs)
        self.obs.append(o)
        self._by_parent.setdefault(o.parent, []).append(i)
        self._by_move.setdefault(o.move, []).append(i)
        self._cache.clear()
        self._fitted = None

    @property
    def model(self) -> FamilyModel:
        """The base model with this family's member and context spreads (``MEMBER_GRID``,
        ``CONTEXT_GRID``), refitted when a measurement arrives."""
        if self._fitted is None:
            self._fitted = self._fit()
        return self._fitted

    def rebase(self, base: FamilyModel) -> None:
        self.base = base
        self._cache.clear()
        self._fitted = None

    def _code(self, move: str) -> int:
        return self._codes.setdefault(move, len(self._codes))

    def _arrays(self, pts: list[Observation]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (np.array([self._code(o.move) for o in pts]), np.array([o.parent for o in pts]),
                np.array([o.log_gain for o in pts]) - self.base.mean)

    def _fit(self) -> FamilyModel:
        pts = self.obs[-FIT_WINDOW:]
        if len(pts) < 2:
            return self.base
        moves, parents, y = self._arrays(pts)
        best, best_score = self.base, -math.inf
        for member_sd, lp_m in MEMBER_GRID:
            for context_sd, lp_c in CONTEXT_GRID:
                m = replace(self.base, member_sd=member_sd, context_sd=context_sd)
                cov = m.cov(moves, parents, moves, parents) + m.noise_sd ** 2 * np.eye(len(pts))
                chol = np.linalg.cholesky(cov)
                z = np.linalg.solve(chol, y)
                score = -0.5 * float(z @ z) - float(np.log(np.diag(chol)).sum()) + lp_m + lp_c
                if score > best_score:
                    best, best_score = m, score
        return best

    def _relevant(self, move: str, parent: int) -> list[int]:
        """A bounded set: the family's measurements below this parent, the member's own, and the
        latest others — so a prediction costs the same in a tree of 10 nodes or 10^5."""
        w = self.base.window
        idx = set(self._by_parent.get(parent, [])[-w:]) | set(self._by_move.get(move, [])[-w:])
        idx |= set(range(max(0, len(self.obs) - w), len(self.obs)))
        return sorted(idx)

    def predict(self, move: str, parent: int) -> tuple[float, float]:
        """Posterior mean and variance of ``move``'s log-speedup below ``parent``."""
        key = (move, parent)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        m = self.model
        pts = [self.obs[i] for i in self._relevant(move, parent)]
        if not pts:
            return m.mean, m.prior_var
        moves, parents, y = self._arrays(pts)
        cov = m.cov(moves, parents, moves, parents) + m.noise_sd ** 2 * np.eye(len(pts))
        k = m.cov(np.array([self._code(move)]), np.array([parent]), moves, parents)[0]
        sol = np.linalg.solve(cov, np.column_stack([y, k]))
        out = (m.mean + float(k @ sol[:, 0]), max(m.prior_var - float(k @ sol[:, 1]), 1e-9))
        self._cache[key] = out
        return out

    def p_win(self, move: str, parent: int) -> float:
        return self.model.p_win(*self.predict(move, parent))

    def measured_below(self, path: set[int]) -> bool:
        """Whether a member was measured below one of ``path`` (a parent and its ancestors): only
        such evidence may rule a member out there — what failed on the code a node builds on
        (as a crash does); a member measured in another branch only lowers the prior, since knobs
        interact (a move at 0.23x below one node can win 2x below its parent)."""
        return any(p in self._by_parent for p in path)

    def measured_at(self, parent: int) -> list[Observation]:
        """The members measured right below ``parent``, in the order they were measured."""
        return [self.obs[i] for i in self._by_parent.get(parent, ())]

    def factor(self, move: str, parent: int) -> float:
        """How the measurements changed the move's chance of a win: P(win | family) / P(win) —
        against the base model's P(win), which is what a skill's prior was set against."""
        return self.p_win(move, parent) / self.base.p_win_prior

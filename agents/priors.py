"""Reshaping move priors from outcomes (docs/architecture.md#scoring, after Hyperloom).

Everything is derived from finished nodes in the store, so priors survive a crash and replay
exactly on resume: there is no hidden learner state to persist. The index is fed one finished
node at a time (``observe``), so it costs O(1) per outcome instead of a pass over the tree.

Moves of one family (the compile variants, the graph-algebra passes, thread counts) are correlated
arms: a measured speedup of one member says a lot about its untried siblings. Each family keeps a
shared posterior over its members' log-speedups (``FamilyPosterior``: a small Gaussian process whose
covariance says how alike two (member, parent) pairs are) and a move's prior is its skill's
prior scaled by how the family's measurements changed its chance of a win — a 0.76x
``compile-default`` drops every other compile variant below the parent's untried families, and a
family whose chance of a win falls under ``MIN_P_WIN`` below a parent is ruled out there, like a
crash. ``OutcomeIndex.trace`` is the one place a move's outcome-shaped prior is computed, factor by
factor, so ``arbor show`` can say where a node's prior came from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from arbor.agents.knowledge.calibration import Tally, shrink, shrink_weight
from arbor.search_tree.records import NodeRecord

CRASHES = {"compile_error", "runtime_error", "timeout", "oom", "hack_suspected", "harness_error",
           "startup_failed", "accuracy_regression"}  # serving: the config will not start / changes outputs
# Verdicts whose measured speedup is a trustworthy observation of what the move did to its parent.
MEASURED = {"improved", "below_parent", "regression", "no_gain"}
# Below a node that won by setting a knob, another value of that same knob replaces the win
# instead of building on it: such moves are alternatives, tried after the complementary ones.
# (Measured on the recorded landscapes: the family boost alone made "STATS=var_mean" outrank
# every complementary move right after "STATS=fused" had won.)
ALTERNATIVE_TO_WIN = 0.5
# Any observation that can raise a prior makes every bound of the tree index exact again.
RISE_ALL = 1e9


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
# Below this chance of a win (given its family's measurements), a move is not offered below that
# parent — when a member was measured below that parent or an ancestor of it: Softmax's four
# compile variants after compile-default measured 0.763x sit at ~0.001. Evidence from another
# branch only lowers a prior (knobs interact: a move at 0.23x below one node can win 2x below its
# parent).
MIN_P_WIN = 0.03


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

    def factor(self, move: str, parent: int) -> float:
        """How the measurements changed the move's chance of a win: P(win | family) / P(win) —
        against the base model's P(win), which is what a skill's prior was set against."""
        return self.p_win(move, parent) / self.base.p_win_prior


@dataclass
class PriorTrace:
    """How one move's prior below one parent was made, factor by factor (``arbor show``)."""

    move: str
    base: float  # the skill's prior
    source: str = "skill"  # or "knowledge": a warm-start prior replaced the skill's
    steps: list[dict] = field(default_factory=list)  # {"why", "factor"}
    family: dict | None = None  # the family's posterior behind its factor
    value: float = 0.0

    def scale(self, why: str, factor: float) -> None:
        if factor != 1.0:
            self.steps.append({"why": why, "factor": round(factor, 4)})
        self.value = min(self.value * factor, 1.0)

    def to_json(self) -> dict:
        out = {"move": self.move, "base": self.base, "source": self.source, "value": round(self.value, 4)}
        if self.steps:
            out["steps"] = [dict(s) for s in self.steps]
        if self.family is not None:
            out["family"] = self.family
        return out


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
    families: dict[str, FamilyPosterior] = field(default_factory=dict)
    model: FamilyModel = DEFAULT_MODEL
    crashed_below: dict[str, set[int]] = field(default_factory=dict)  # move -> parent ids
    ancestors_of: Callable[[int], set[int]] | None = None
    _parents: dict[int, int | None] = field(default_factory=dict)
    _speedup: dict[int, float] = field(default_factory=dict)  # finished node -> its speedup
    _waiting: dict[int, list[NodeRecord]] = field(default_factory=dict)  # parent not finished yet
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
    # moves ruled out below some parent by their family's posterior (move -> why): the "exhausted"
    # stop says so
    ruled_out: dict[str, str] = field(default_factory=dict)
    # False: a move's prior ignores its siblings' measurements (agents.family_posterior: the
    # ablation the family-waste benchmark runs as "before"); crashes and calibration still count
    family_posterior: bool = True

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
        if n.speedup is not None and n.speedup > 0:
            self._speedup[n.id] = n.speedup
        elif n.parent_id is None:
            self._speedup[n.id] = 1.0
        rise = None
        for child in self._waiting.pop(n.id, []):  # measured before this parent was judged
            rise = _max(rise, self._measured(child))
        if n.move_id is None:
            return rise
        rise = _max(rise, self._calibrate(n))
        if n.diagnosis in MEASURED and n.speedup:
            if n.parent_id is not None and n.parent_id not in self._speedup:
                self._waiting.setdefault(n.parent_id, []).append(n)
                return _max(rise, 1.0)
            return _max(rise, self._measured(n))
        if n.diagnosis in CRASHES and n.parent_id is not None:
            self.crashed_below.setdefault(n.move_id, set()).add(n.parent_id)
            return _max(rise, 1.0)
        return rise

    def _measured(self, n: NodeRecord) -> float:
        """Add a measured member to its family's posterior; the factor by which that may raise a
        prior anywhere (RISE_ALL when it came out above what the family predicted for it)."""
        parent_speedup = self._speedup.get(n.parent_id, 1.0) if n.parent_id is not None else 1.0
        if not n.speedup or parent_speedup <= 0:
            return 1.0
        fam = self.family(n.family or n.move_id or "")
        y = math.log(n.speedup / parent_speedup)
        before, _ = fam.predict(n.move_id or "", n.parent_id or 0)
        wins = any(o.log_gain > self.model.win_log for o in fam.obs)
        fam.add(Observation(n.move_id or "", n.parent_id or 0, n.id, y))
        if y > before:  # the family's means rise wherever it correlates with this measurement
            return RISE_ALL
        # lower means everywhere, but a narrower posterior can still raise P(win) where the mean is
        # above a win (after a win): there P(win) >= 0.5 already, so it at most doubles
        return 2.0 if wins else 1.0

    def set_win_bar(self, speedup: float) -> bool:
        """What a move must gain over its parent to count as a win: the bar the Critic applies
        (``min_speedup``, or 1 + the campaign's noise floor when that is higher), set once the
        baseline's A/A is known. With the fixed 2% bar a family measured at 1.01-1.09x on a
        campaign whose noise floor rejected each as ``no_gain`` looked like a winning family:
        seen on a warm start of Conv+ReLU+bias, five compile variants in a row, all ``no_gain``.
        True when the bar moved (every prior must be bounded again)."""
        win_log = math.log(max(speedup, 1.0 + 1e-6))
        if abs(win_log - self.model.win_log) < 1e-12:
            return False
        self.model = replace(self.model, win_log=win_log)
        for fam in self.families.values():
            fam.rebase(self.model)
        return True

    def family(self, name: str) -> FamilyPosterior:
        fam = self.families.get(name)
        if fam is None:
            fam = self.families[name] = FamilyPosterior(self.model)
        return fam

    def _calibrate(self, n: NodeRecord) -> float | None:
        """Score the node's prior (its P(accept)) against its outcome; a rise factor that makes
        every bound 1 when the family's priors are (now) being shrunk, since shrinking pulls low
        priors up toward the observed rate."""
        if n.state not in ("accepted", "rejected", "failed") or not n.family:
            return None
        tally = self.calibration.setdefault(n.family, Tally())
        tally.add(n.prior, n.state == "accepted" and n.diagnosis == "improved", None, None)
        return RISE_ALL if shrink_weight(tally) < 1.0 else None

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
        return self.trace(move_id, family, base, parent_id).value

    def trace(self, move_id: str, family: str | None, base: float, parent_id: int) -> PriorTrace:
        """The move's prior below ``parent_id`` and how it was made: the skill's (or the knowledge
        store's) prior, the family's calibration, its shared posterior, a crash below an ancestor."""
        warm = self.warm_prior(move_id, parent_id)
        t = PriorTrace(move_id, base, "skill" if warm is None else "knowledge")
        t.value = base if warm is None else warm
        crashed = self.crashed_below.get(move_id)
        if crashed and crashed & self.ancestors(parent_id):
            t.scale("crashed below this parent or an ancestor", 0.0)
            return t
        name = family or move_id
        if family:
            shrunk = shrink(t.value, self.calibration.get(family))
            if t.value > 0 and shrunk != t.value:
                t.scale(f"family {family}'s P(accept) calibration", shrunk / t.value)
        fam = self.families.get(name) if self.family_posterior else None
        if fam is not None and fam.obs:
            p_win = fam.p_win(move_id, parent_id)
            mean, _ = fam.predict(move_id, parent_id)
            measured = sorted(fam.obs, key=lambda o: (o.parent != parent_id, -o.node))[:4]
            t.family = {"name": name, "p_win": round(p_win, 4), "p_win_prior": round(self.model.p_win_prior, 4),
                        "expected_speedup": round(math.exp(mean), 4), "observations": len(fam.obs),
                        "measured": [{"move": o.move, "node": o.node, "parent": o.parent,
                                      "speedup_over_parent": round(math.exp(o.log_gain), 4)} for o in measured]}
            shown = ", ".join(f"{o.move} {math.exp(o.log_gain):.3f}x" for o in measured[:2])
            if p_win < MIN_P_WIN and fam.measured_below(self.ancestors(parent_id)):
                self.ruled_out[move_id] = f"family {name} measured {shown}"
                t.scale(f"ruled out by family {name} (P(win) {p_win:.3f} < {MIN_P_WIN}; measured {shown})", 0.0)
            else:
                t.scale(f"family {name}'s posterior (P(win) {p_win:.2f}; measured {shown})", fam.factor(move_id, parent_id))
        return t


def _max(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)

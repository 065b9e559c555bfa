"""Reshaping move priors from outcomes (docs/architecture.md#scoring, after Hyperloom).

Everything is derived from finished nodes in the store, so priors survive a crash and replay
exactly on resume: there is no hidden learner state to persist. The index is fed one finished
node at a time (``observe``), so it costs O(1) per outcome instead of a pass over the tree.

Moves of one family (the compile variants, the graph-algebra passes, thread counts) are correlated
arms: a measured speedup of one member says a lot about its untried siblings. Each family keeps a
shared posterior over its members' log-speedups (``FamilyPosterior``, ``family_posterior.py``: a
small Gaussian process whose covariance says how alike two (member, parent) pairs are) and a
move's prior is its skill's prior scaled by how the family's measurements changed its chance of a
win — a 0.76x ``compile-default`` drops every other compile variant below the parent's untried families, and a
family whose chance of a win falls under ``MIN_P_WIN`` below a parent is ruled out there, like a
crash. ``OutcomeIndex.trace`` is the one place a move's outcome-shaped prior is computed, factor by
factor, so ``arbor show`` can say where a node's prior came from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

from arbor.agents.family_posterior import DEFAULT_MODEL, FamilyModel, FamilyPosterior, Observation
from arbor.agents.knowledge.calibration import Tally, shrink, shrink_weight
from arbor.agents.knowledge.recipes import Recipe, expand
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
# Below this chance of a win (given its family's measurements), a move is not offered below that
# parent — when a member was measured below that parent or an ancestor of it: Softmax's four
# compile variants after compile-default measured 0.763x sit at ~0.001. Evidence from another
# branch only lowers a prior (knobs interact: a move at 0.23x below one node can win 2x below its
# parent).
MIN_P_WIN = 0.03
# A move is not measured below a parent so far under the campaign's best that even this gain (or
# twice the largest gain its family has measured in this campaign, if larger) leaves it there: a
# Gemm->Divide->Sum chain collapsed to 112x, and six compile variants (1.09x at best) were then
# measured at the 1.0x root, none of which could ever become the best (issue 28's live count). The
# largest single-move gain on the development set that was not an algebraic collapse is 6.1x (a
# native LayerNorm); a family not yet measured in the campaign is never ruled out this way (its
# reach is unknown: a collapse is a 100x move).
DOMINANCE_REACH = 8.0
# A family measured with no gain right after a move that won (a child of the parent
# the family is offered at) has its prior at that parent restored: the measurement is as well
# explained by the winning move having taken the family's gain (they overlap) as by the family
# being useless, and only the family alone at the parent tells them apart. Seen on a warm start of
# Conv+Mish+GroupNorm: graph-algebra-all won 1.16x at the root, compile-default after it gained
# 1.002x, and the warm campaign never measured compile-default alone at the root, where the cold
# campaign found 1.30x (its final; warm's was 0.92x of it, the one worse final of three runs).
# A member that lost more than this after the win did harm of its own, which an overlap does not
# explain (compile-epilogue-block 0.96x after that win is restored, a 0.76x compile is not).
OVERLAP_FLOOR = 0.9


@dataclass(frozen=True)
class Overlap:
    """A family that gained nothing right after another family's move won (``OutcomeIndex.overlap``)."""

    parent: int  # where the win was made: the family alone is untested here
    child: int  # the win
    won_by: str  # the winning move
    family: str
    move: str  # the member measured after the win
    gain: float  # what it gained there (a ratio)
    won: float  # what the win gained over the parent


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
    best_of: Callable[[], tuple[int, float] | None] | None = None  # (node id, speedup) of the best accepted
    _parents: dict[int, int | None] = field(default_factory=dict)
    _speedup: dict[int, float] = field(default_factory=dict)  # finished node -> its speedup
    _waiting: dict[int, list[NodeRecord]] = field(default_factory=dict)  # parent not finished yet
    # Warm start: priors from records of similar problems (move id -> prior replacing the
    # skill's), and the expected log-speedup of a move when it wins there.
    warm: dict[str, float] = field(default_factory=dict)
    warm_log: dict[str, float] = field(default_factory=dict)
    warm_notes: dict[str, dict] = field(default_factory=dict)
    warm_by_path: dict[tuple, float] = field(default_factory=dict)  # (moves applied, move) -> prior
    # Warm start: neighbours' winning move sequences, offered whole at the baseline
    # (agents/knowledge/recipes.py)
    recipes: list[Recipe] = field(default_factory=list)
    _move_of: dict[int, str | None] = field(default_factory=dict)
    _family_of: dict[int, str] = field(default_factory=dict)  # node -> its move's family (or the move)
    _children: dict[int, list[int]] = field(default_factory=dict)  # parent -> its accepted children
    _overlaps: set[tuple[int, str]] = field(default_factory=set)  # (parent, family) seen to overlap
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
        if n.parent_id is not None and n.state == "accepted" and n.id not in self._children.get(n.parent_id, ()):
            self._children.setdefault(n.parent_id, []).append(n.id)
        self._move_of[n.id] = n.move_id
        if n.move_id is not None:
            self._family_of[n.id] = n.family or n.move_id
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
        grandparent = self._parents.get(n.parent_id) if n.parent_id is not None else None
        overlap = grandparent is not None and self.overlap(n.family or n.move_id or "", grandparent) is not None
        if overlap:
            self._overlaps.add((grandparent, n.family or n.move_id or ""))
        if y > before or overlap:
            # the family's means rise wherever it correlates with this measurement; or a no-gain
            # right after a win restored its prior one level up (``overlap``)
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
            path = tuple(sorted(m for a in self.ancestors(parent_id) for m in expand(self._move_of.get(a))))
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

    def dominated(self, family: str, parent_id: int) -> str | None:
        """Why no member of ``family`` is worth measuring below ``parent_id`` (``DOMINANCE_REACH``), or
        None: the family was measured in this campaign, and the parent's speedup times its reach stays
        below the best accepted speedup."""
        best = self.best_of() if self.best_of is not None else None
        fam = self.families.get(family)
        parent = self._speedup.get(parent_id)
        if not self.family_posterior or best is None or fam is None or not fam.obs or parent is None or parent <= 0:
            return None
        best_id, best_speedup = best
        gained = math.exp(max(o.log_gain for o in fam.obs))
        reach = max(DOMINANCE_REACH, 2.0 * gained)
        if parent * reach >= best_speedup:
            return None
        return (f"below this {parent:.3g}x parent even a {reach:.3g}x gain stays under the best "
                f"({best_speedup:.3g}x, node {best_id}); family {family} gained at most {gained:.3g}x here")

    def overlap(self, family: str, parent_id: int) -> Overlap | None:
        """The first no-gain of ``family`` right after a win of another family at a child of
        ``parent_id``, while the family was never measured at ``parent_id`` itself: the winning move
        may have taken the family's gain, so the family alone there is its untested alternative."""
        fam = self.families.get(family)
        here = self._speedup.get(parent_id)
        if fam is None or here is None or here <= 0 or fam.measured_below({parent_id}):
            return None
        for child in self._children.get(parent_id, ()):
            won = self._speedup.get(child)
            if not won or self._family_of.get(child, family) == family or math.log(won / here) <= self.model.win_log:
                continue
            for o in fam.measured_at(child):
                if math.log(OVERLAP_FLOOR) <= o.log_gain <= self.model.win_log:
                    return Overlap(parent_id, child, self._move_of.get(child) or "", family, o.move,
                                   math.exp(o.log_gain), won / here)
        return None

    def overlap_tests(self) -> list[Overlap]:
        """Overlaps worth one evaluation now: the move that gained nothing after the win is expected,
        when it wins, to gain more than the win did (the knowledge store's mean win of it, or its
        family's largest win in this campaign) — only then can it alone replace that win. The
        heuristic Orchestrator measures these first (``HeuristicOrchestrator.select``); every other
        overlap only has its prior restored (``trace``)."""
        out = []
        for parent_id, name in sorted(self._overlaps):
            over = self.overlap(name, parent_id)
            if over is None:  # measured there since
                self._overlaps.discard((parent_id, name))
                continue
            wins = [o.log_gain for o in self.families[name].obs if o.log_gain > self.model.win_log]
            expected = max([self.warm_log.get(over.move, 0.0), *wins])
            if expected > math.log(over.won):
                out.append(over)
        return sorted(out, key=lambda o: o.child)

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
        dominated = self.dominated(name, parent_id)
        if dominated is not None:
            self.ruled_out.setdefault(move_id, dominated)
            t.scale(f"dominated: {dominated}", 0.0)
            return t
        # only pairs recorded as they were measured (``_measured``): this runs for every option
        over = self.overlap(name, parent_id) if self.family_posterior and (parent_id, name) in self._overlaps else None
        if over is not None and 0 < t.value < base:  # a neighbour's lower prior came from other paths too
            t.scale(f"family {name} gained {over.gain:.3f}x after {over.won_by} won here (node {over.child}): "
                    "the two may overlap, so it is measured alone here at the skill's prior", base / t.value)
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
            elif over is not None:  # its measurements are what the overlap explains: they do not lower it here
                t.scale(f"family {name}'s posterior (P(win) {p_win:.2f}; measured {shown}), only if it rises",
                        max(1.0, fam.factor(move_id, parent_id)))
            else:
                t.scale(f"family {name}'s posterior (P(win) {p_win:.2f}; measured {shown})", fam.factor(move_id, parent_id))
        return t


def _max(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)

"""What the offline (move-applying) Specialists share: priors from outcomes, applying a move once
per parent source, the seeded ranking and the proposal record.

Deterministic for a seed: candidates are ordered by adjusted prior, ties broken by a seeded
shuffle. Transforms are pure functions of the source, so their results are cached by
(source sha, move id) and each is computed once per process. Kernel and serving specialists
differ only in which moves a parent admits (``gate``), which results are valid (``valid``) and
how a move is described (``describe``).
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import Callable

from arbor.agents.contracts import Option, Proposal, Specialist
from arbor.agents.knowledge.recipes import FAMILY as RECIPE_FAMILY, recipe_id
from arbor.agents.priors import ALTERNATIVE_TO_WIN, OutcomeIndex, PriorTrace, alternative_to_win
from arbor.agents.skills import MoveSpec
from arbor.agents.transforms import apply_move
from arbor.search_tree.records import NodeRecord
from arbor.search_tree.store import artifact_sha

from .conditions import Condition

# What a heuristic move is expected to gain when it wins, without knowledge of it (log of 1.1x).
DEFAULT_WIN_LOG = math.log(1.1)
# How far above another option a promoted one is put: a recipe just above the best of its own
# moves (it was the neighbour's best, above what each of its moves reached there alone:
# agents/knowledge/recipes.py), the skill's first choice just above the top of a warm start.
RANK_EDGE = 0.01
# A move whose ``when:`` condition cannot be decided yet (a fact is not known) is offered at this
# share of its prior: neither ruled out nor ranked as if it applied.
UNKNOWN_FACTOR = 0.5


class HeuristicSpecialist(Specialist):
    name = "specialist-heuristic"

    def __init__(self, moves: list[MoveSpec], seed: int = 0):
        self.moves = list(moves)
        self.by_id = {m.id: m for m in self.moves}
        self.seed = seed
        self._cache: dict[tuple[str, str], str | None] = {}
        self.conditions: dict[str, Condition | None] = {}  # move id -> its ``when:`` (subclasses compile them)

    # --- what varies by target kind -------------------------------------------------------
    def move_priors(self) -> dict[str, float]:
        return {m.id: m.prior for m in self.moves}

    def env(self, parent: NodeRecord, parent_source: str) -> dict | None:
        """What ``gate`` may read about the parent (computed once per ``options`` call)."""
        return None

    def gate(self, move: MoveSpec, prior: float, env: dict | None) -> tuple[float, str] | None:
        """Whether ``move`` is offered below this parent: None (not offered) or its prior with
        the reason it is offered — by its ``when:`` condition over ``env``, when it has one."""
        cond = self.conditions.get(move.id)
        if cond is None:
            return prior, ""
        env = env or {}
        met = cond.evaluate(env)
        if met is False:
            return None
        if met is None:
            return prior * UNKNOWN_FACTOR, self.unknown_reason(cond)
        shown = ", ".join(f"{n}={_fmt(env[n])}" for n in sorted(cond.names) if n in env)
        return prior, f"because {cond.text} ({shown})"

    def unknown_reason(self, cond: Condition) -> str:
        """Why a move whose condition cannot be decided yet is offered at a discount."""
        return f"not known whether {cond.text}"

    def valid(self, new_source: str) -> bool:
        """Whether a move's result may be measured at all."""
        return True

    def describe(self, move: MoveSpec) -> str:
        return move.description or move.transform

    # --- shared ----------------------------------------------------------------------------
    def _apply(self, parent_sha: str, parent_source: str, move: MoveSpec) -> str | None:
        key = (parent_sha, move.id)
        if key not in self._cache:
            try:
                self._cache[key] = apply_move(parent_source, move.transform, move.params)
            except Exception:  # a transform that cannot handle this source is simply not applicable
                self._cache[key] = None
        return self._cache[key]

    def prior_trace(self, move: MoveSpec, parent: NodeRecord, tried: set[str],
                    outcomes: OutcomeIndex) -> PriorTrace | None:
        """The one place a move's prior below ``parent`` is computed, factor by factor: the
        outcome index's (skill or knowledge prior, calibration, the family's shared posterior,
        crashes), then what this Specialist knows (an alternative to the knob that just won here;
        kernel: profile aiming). None when the move was tried there already."""
        if move.id in tried:
            return None
        t = outcomes.trace(move.id, move.family, move.prior, parent.id)
        if t.value > 0 and alternative_to_win(move, parent, self.by_id):
            t.scale("another value of the knob whose change won here", ALTERNATIVE_TO_WIN)
        return t

    def prior(self, move: MoveSpec, parent: NodeRecord, tried: set[str], outcomes: OutcomeIndex) -> float:
        """The move's prior below ``parent`` from outcomes so far (0: tried, or ruled out)."""
        t = self.prior_trace(move, parent, tried, outcomes)
        return t.value if t is not None else 0.0

    def options(self, parent: NodeRecord, parent_source: str, tried: set[str],
                is_known: Callable[[str], bool], outcomes: OutcomeIndex | None) -> list[Option]:
        """Untried moves at ``parent`` with their adjusted priors, best first. A move whose
        result is already in the tree (reached by another path) counts as tried."""
        outcomes = outcomes if outcomes is not None else OutcomeIndex()
        env = self.env(parent, parent_source)
        out = []
        for move in self.moves:
            trace = self.prior_trace(move, parent, tried, outcomes)
            if trace is None or trace.value <= 0:
                continue
            gated = self.gate(move, trace.value, env)
            if gated is None:
                continue
            prior, why = gated
            if trace.value > 0 and prior != trace.value:
                trace.scale(why or "offered below this parent at a changed prior", prior / trace.value)
            new = self._apply(parent.artifact_sha, parent_source, move)
            if new is None or not self.valid(new) or is_known(artifact_sha(new)):
                continue
            out.append(Option(move, new, trace.value, why, outcomes.warm_log.get(move.id, DEFAULT_WIN_LOG),
                              outcomes.warm_note(move.id, parent.id), trace))
        if parent.parent_id is None:
            out += self._recipe_options(parent, parent_source, tried, is_known, outcomes, env, out)
            self._keep_skill_first(out, tried, outcomes)
        rng = random.Random(f"{self.seed}:{parent.id}")
        rng.shuffle(out)
        out.sort(key=lambda o: -o.prior)  # stable: equal priors keep the seeded order
        return out

    def _recipe_options(self, parent: NodeRecord, parent_source: str, tried: set[str],
                        is_known: Callable[[str], bool], outcomes: OutcomeIndex, env: dict | None,
                        moves: list[Option]) -> list[Option]:
        """The warm start's recipes as options at the baseline: each neighbour's winning sequence
        applied move after move to this source. A move this Specialist lacks, whose condition
        is false here or that does not apply to the source so far is left out; what remains must
        still be two moves or more (one move is offered on its own)."""
        out = []
        for recipe in outcomes.recipes:
            src, applied = parent_source, []
            for move_id in recipe.moves:
                move = self.by_id.get(move_id)
                if move is None or self.gate(move, move.prior, env) is None:
                    continue
                new = self._apply(artifact_sha(src), src, move)
                if new is not None:
                    src, applied = new, applied + [move_id]
            rid = recipe_id(applied)
            if len(applied) < 2 or rid in tried or not self.valid(src) or is_known(artifact_sha(src)):
                continue
            own = max((o.prior for o in moves if o.move.id in applied), default=0.0)
            prior = min(1.0, max(recipe.similarity, own) + RANK_EDGE)
            why = (f"the recipe of {recipe.campaign}'s best ({recipe.speedup:.3g}x there, similarity "
                   f"{recipe.similarity:.2f}): {' then '.join(applied)}")
            spec = MoveSpec(id=rid, transform="recipe", params={"moves": applied}, prior=prior,
                            family=RECIPE_FAMILY, description=why)
            trace = PriorTrace(rid, prior, "knowledge", value=prior)
            note = {"source": "knowledge", "recipe": recipe.to_json(), "prior": round(prior, 4)}
            out.append(Option(spec, src, prior, "", math.log(max(recipe.speedup, 1.0)), note, trace))
        return out

    def _keep_skill_first(self, options: list[Option], tried: set[str], outcomes: OutcomeIndex) -> None:
        """A warm start reorders the baseline's moves with evidence from other problems, and that
        evidence can miss what matters here: the nearest neighbour of a convolution epilogue had
        never tried the C++ fusion, its compile win put compile first, and the warm campaign never
        measured the fusion that won 2.8x at the cold campaign's first evaluation (warm-start run
        of 2026-11-27). So the move the skill ranks first at the baseline, if the knowledge moved it
        down, is the next one measured there once anything else was: a misleading neighbour costs
        one evaluation, never the cold campaign's first win."""
        if not tried or not (outcomes.warm or outcomes.recipes):
            return
        moves = [o for o in options if o.move.family != RECIPE_FAMILY]
        if not moves:
            return
        first = max(moves, key=lambda o: o.move.prior)
        if any(m in self.by_id and self.by_id[m].prior >= first.move.prior for m in tried):
            return  # the skill's first choice here was measured already
        top = max(o.prior for o in options)
        if first.prior < top:
            new = min(1.0, top + RANK_EDGE)
            if first.trace is not None and first.prior > 0:
                first.trace.scale("the skill's first choice at the baseline: measured next in a warm start",
                                  new / first.prior)
            options[options.index(first)] = replace(first, prior=new)

    def propose(self, parent: NodeRecord, options: list, k: int = 1) -> list[Proposal]:
        proposals = []
        for opt in options[:k]:
            why = f" — {opt.why}" if opt.why else ""
            # predicted gain: the expected ratio, P(accept) x the log-speedup of a win
            gain = math.exp(opt.prior * (opt.expected_log if opt.expected_log is not None else DEFAULT_WIN_LOG))
            audit = {"knowledge": opt.knowledge} if opt.knowledge else {}
            if opt.trace is not None:  # made JSON only for what is proposed: options are many
                audit["prior_trace"] = opt.trace.to_json()
            proposals.append(Proposal(
                source=opt.source, move_id=opt.move.id, family=opt.move.family,
                hypothesis=f"{opt.move.id} on node {parent.id}: {self.describe(opt.move)}{why}",
                prior=opt.prior, predicted_gain=gain, audit=audit))
        return proposals


def _fmt(v) -> str:  # type: ignore[no-untyped-def]
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, tuple):
        return "/".join(map(str, v)) or "none"
    return str(v)

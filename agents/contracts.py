"""The three agent roles and the values they hand each other.

Every role has a heuristic and an LLM implementation, and a campaign may mix them (an LLM
Orchestrator over heuristic Specialists, a narrating LLM Critic around the gate Critic, ...).
The loop, the campaign wiring and the targets are typed against these classes only, so they
never need to know which backend fills a role. The contracts are ABCs rather than Protocols
because they carry shared behaviour (``Critic.narrate`` defaults to "no narrative") and because
an implementation should say which role it fills — a missing method is an error at
construction, not a ``getattr`` fallback in the loop.

The division of power is part of the contract: the Orchestrator only *selects* (a ``Selection``),
a Specialist only *proposes* (``Proposal``s), and only the Critic judges (a ``Judgement``); no
role can do another's job through these interfaces.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Union

if TYPE_CHECKING:
    from arbor.agents.critic.evidence import CriticConfig, Evidence
    from arbor.agents.priors import OutcomeIndex, PriorTrace
    from arbor.agents.skills import MoveSpec
    from arbor.search_tree.index import TreeIndex
    from arbor.search_tree.records import MeasurementRecord, NodeRecord


# --- values -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Proposal:
    """One candidate a Specialist hands to the loop, which stores it as a new node."""

    source: str
    move_id: str
    family: str | None
    hypothesis: str
    prior: float
    predicted_gain: float | None  # predicted speedup ratio over the parent (> 0), when known
    # What produced it (LLM: the reply event, mode, fitted prompt); merged into the loop's
    # ``propose`` event so an audit can trace every node to the call that wrote it.
    audit: dict = field(default_factory=dict)

    @property
    def p_accept(self) -> float:
        """The predicted probability that the Critic accepts it: every role's prior is one
        (heuristic priors are reshaped acceptance odds; LLM priors come from the predicted gain),
        scored against the verdict by the calibration report."""
        return min(max(float(self.prior), 0.0), 1.0)

    @property
    def predicted_log_speedup(self) -> float | None:
        g = self.predicted_gain
        return math.log(g) if g is not None and g > 0 else None


@dataclass(frozen=True)
class Option:
    """A concrete, already-applied move a heuristic Specialist can propose below a parent."""

    move: MoveSpec
    source: str
    prior: float
    why: str = ""  # why the move is offered here (the serving specialist's symptom condition)
    expected_log: float | None = None  # predicted log-speedup if it is accepted
    knowledge: dict | None = None  # the warm-start prior behind ``prior``, when one applied
    trace: PriorTrace | None = None  # how ``prior`` was made, factor by factor (JSON: ``to_json()``)


@dataclass(frozen=True)
class Directive:
    """What the Orchestrator asks of a code-writing Specialist for one parent: the LLM analogue
    of an ``Option`` (the Specialist writes the candidate itself)."""

    mode: str  # draft | debug | improve
    prior: float
    note: str = ""


Choice = Union[Option, Directive]


@dataclass
class Selection:
    """The Orchestrator's pick: the node to expand and what to try there, best first."""

    parent: NodeRecord
    options: list[Choice]
    score_note: str


@dataclass
class Judgement:
    """The Critic's verdict on one measured (or statically rejected) node."""

    decision: str  # accept | reject | remeasure | fail
    diagnosis: str
    reason: str
    final_state: str | None  # accepted | rejected | failed | None (remeasure)
    gates: list[dict] = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    remeasure_purpose: str | None = None
    speedup: float | None = None
    value: float | None = None
    noise_floor: float | None = None


# --- roles --------------------------------------------------------------------------------
class Specialist(ABC):
    """Turns a selected parent into candidates.

    Its options are ``Option``s (moves the Specialist applied before it is asked to propose) or
    ``Directive``s (the Specialist writes the candidate when it proposes, e.g. with a model)."""

    name: str = "specialist"

    @abstractmethod
    def options(self, parent: NodeRecord, parent_source: str, tried: set[str],
                is_known: Callable[[str], bool], outcomes: OutcomeIndex | None) -> list[Choice]:
        """What can still be tried below ``parent``, best first (empty: nothing left).
        ``tried`` holds the move ids of its children; ``is_known(sha)`` says whether an artifact
        is already in the tree."""

    @abstractmethod
    def propose(self, parent: NodeRecord, options: list[Choice], k: int = 1) -> list[Proposal]:
        """Up to ``k`` candidates from ``options`` (a ``Selection``'s). May return none."""

    def set_profile(self, profile: dict) -> None:
        """The latest bottleneck profile (baseline or new best): where the time goes. Advice a
        specialist may aim with (heuristic ranking, LLM prompt); ignoring it is allowed."""

    def set_knowledge(self, neighbours: list) -> None:
        """What the most similar problems taught (``agents.knowledge.brief.Neighbour``s), once per
        campaign after the baseline: advice a Specialist that writes its own candidates may put
        in its prompt; one with a move table gets warm priors instead and may ignore it."""

    def move_priors(self) -> dict[str, float]:
        """Skill prior per move id, for moves this specialist applies (what knowledge-derived
        priors are blended with); empty for a specialist that writes candidates freely."""
        return {}


class Orchestrator(ABC):
    """Picks the node to expand next and hands it, with its options, to the Specialist.

    It reads the tree and never accepts anything."""

    name: str = "orchestrator"
    specialist: Specialist

    @abstractmethod
    def select(self, index: TreeIndex, source_of: Callable[[str], str], is_known: Callable[[str], bool],
               step: int) -> Selection | None:
        """The next node to expand, or None when nothing is left to expand."""

    def follow(self, index: TreeIndex) -> None:
        """Called once with the campaign's tree index before it loads any node, so that an
        orchestrator that learns from outcomes sees every finished node — those of an earlier run
        of a resumed campaign and the baseline included. Default: nothing to learn."""

    def priors_may_rise(self, factor: float) -> None:
        """Something outside the tree's outcomes (a new bottleneck profile) may have raised
        priors by up to ``factor``: an orchestrator that bounds priors must widen its bounds."""

    def outcome_index(self) -> OutcomeIndex | None:
        """The per-move outcome statistics it ranks with, which a warm start may seed from
        knowledge records; None for an orchestrator that keeps none (it gets no warm start)."""
        return None

    def schedule_space(self, index: TreeIndex, source_of: Callable[[str], str], is_known: Callable[[str], bool],
                       left: float | None, bound: str | None) -> tuple[Selection | None, str]:
        """Asked when ``select`` found nothing: a node whose generated kernel's schedule space is
        worth searching given ``left`` (what the speed of light says is left for the best; None:
        unknown) and the ``bound`` that binds, with why — or None and why not, in numbers (the
        stop reason quotes it). Default: no schedule space."""
        return None, "this orchestrator does not search schedule spaces"


class Critic(ABC):
    """The only role that can accept a result: runs the gates over evidence from the store."""

    name: str = "critic"
    config: CriticConfig

    @abstractmethod
    def static_check(self, source: str, allowed_modules: frozenset[str] = frozenset(),
                     precision: str = "fp32") -> Judgement | None:
        """The static guard, before anything runs. None means the candidate may be measured.
        ``precision``: the campaign's precision mode, which decides the precision switches."""

    @abstractmethod
    def judge(self, ev: Evidence, baseline_samples: list[float], candidate_samples: list[float]) -> Judgement:
        """The verdict on one measurement series."""

    def narrate(self, node: NodeRecord, judgement: Judgement, source: str,
                parent_source: Callable[[], str | None], measurement: MeasurementRecord | None) -> Judgement:
        """The verdict, possibly with an explanation added to its gate log — never a changed
        decision. ``parent_source`` is called only by critics that read it (it costs a store
        read). Default: no narrative."""
        return judgement

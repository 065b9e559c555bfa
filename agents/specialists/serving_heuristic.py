"""Offline serving Specialist: knob moves from skills, triggered by the parent's symptoms.

Same contract and shared behaviour as the kernel specialist (``HeuristicSpecialist``), with one
addition: a move may carry ``when: <condition>`` over what the parent's last measurement showed
— queueing, KV-cache usage, preemptions, the TTFT/TPOT balance, SLO ratios — and over the
parent's knob values. A move whose condition is false is not offered below that parent (raising
the batch size cures queueing, not a slow decode); one whose condition cannot be evaluated (the
server does not report that symptom) is offered at half its prior. Every candidate config must
pass the campaign's own knob table (``config_problem``) before it is offered, so no measurement
is wasted on a config the spec forbids.
"""

from __future__ import annotations

import json
from typing import Callable

from arbor.agents.skills import MoveSpec, SkillError
from arbor.search_tree.records import NodeRecord

from .conditions import Condition, ConditionError, compile_condition
from .heuristic import HeuristicSpecialist


class HeuristicServingSpecialist(HeuristicSpecialist):
    name = "serving-heuristic"

    def __init__(self, moves: list[MoveSpec], seed: int = 0,
                 symptoms_of: Callable[[NodeRecord], dict | None] | None = None,
                 config_problem: Callable[[str], str | None] | None = None):
        super().__init__(moves, seed)
        self.symptoms_of = symptoms_of or (lambda node: None)
        self.config_problem = config_problem or (lambda text: None)
        for m in self.moves:
            try:
                self.conditions[m.id] = compile_condition(m.when) if m.when else None
            except ConditionError as err:
                raise SkillError(f"move {m.id}", "when", f"{m.when!r}: {err}",
                                 "write a comparison such as 'queued > 0 and kv_usage < 0.7'") from None

    def env(self, parent: NodeRecord, parent_source: str) -> dict:
        """Names a condition can read: the parent's knob values, then its symptoms."""
        try:
            cfg = json.loads(parent_source)
        except ValueError:
            cfg = {}
        return {**(cfg if isinstance(cfg, dict) else {}), **(self.symptoms_of(parent) or {})}

    def unknown_reason(self, cond: Condition) -> str:
        return f"symptoms unknown for '{cond.text}'"

    def valid(self, new_source: str) -> bool:
        """Only configs the campaign's own knob table allows: no measurement is wasted on a
        config the spec forbids."""
        return self.config_problem(new_source) is None

    def describe(self, move: MoveSpec) -> str:
        return move.description or f"{move.transform} {move.params}"


KNOB_TRANSFORMS = ("knob_set", "knob_scale", "knob_toggle")


def serving_moves(skills, engine: str, knobs: set[str]) -> list[MoveSpec]:
    """Knob moves of hard serving skills for ``engine`` (``applies_to.engines``; a skill without
    that key applies to every engine) whose knob the campaign declares."""
    out: list[MoveSpec] = []
    for skill in skills:
        if skill.kind != "hard" or skill.domain not in ("serving", "any"):
            continue
        engines = skill.applies_to.get("engines")
        if engines is not None and engine not in engines:
            continue
        out.extend(m for m in skill.moves if m.transform in KNOB_TRANSFORMS and m.params.get("knob") in knobs)
    return out

"""Serving Specialist, LLM mode: proposes knob changes to a serving configuration.

A serving candidate is a JSON object of knob values (the serving target stores its canonical
JSON as the artifact). The model sees the parent configuration, the knob table with allowed
values, the parent's measurement and diagnosis, and the tree summary; it answers with changes,
a rationale and a predicted gain. Every change is validated against the knob table before a
candidate exists, and the new configuration is serialised with the target's own canonical form
so identical configurations are never measured twice.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable

from arbor.agents.contracts import Directive, Proposal
from arbor.agents.llm import roles
from arbor.agents.llm.prompts import Section
from arbor.agents.llm.schemas import ServingProposals
from arbor.search_tree.records import NodeRecord
from arbor.search_tree.store import artifact_sha

from .llm_base import DEBUG_PREFIX, LLMSpecialistBase


def canonical_json(config: dict) -> str:
    """Default canonical form: sorted keys, compact separators."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Knob:
    name: str
    kind: str = "str"  # int | float | bool | choice | str
    choices: tuple | None = None
    min: float | None = None
    max: float | None = None
    description: str = ""

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not allowed for this knob, or None."""
        if self.choices is not None:
            return None if value in self.choices else f"{self.name} must be one of {list(self.choices)}"
        if self.kind == "bool":
            return None if isinstance(value, bool) else f"{self.name} must be true or false"
        if self.kind in ("int", "float"):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    (self.kind == "int" and not float(value).is_integer()):
                return f"{self.name} must be {'an integer' if self.kind == 'int' else 'a number'}"
            if self.min is not None and value < self.min or self.max is not None and value > self.max:
                return f"{self.name} must lie in [{self.min}, {self.max}]"
            return None
        return None if isinstance(value, str) or value is None else f"{self.name} must be a string"

    def describe(self) -> str:
        if self.choices is not None:
            allowed = f"one of {list(self.choices)}"
        elif self.kind in ("int", "float"):
            allowed = f"{self.kind} in [{self.min}, {self.max}]"
        else:
            allowed = self.kind
        return f"- {self.name}: {allowed}" + (f" — {self.description}" if self.description else "")


class LLMServingSpecialist(LLMSpecialistBase):
    name = "serving-llm"
    role_text = roles.SERVING
    domain = "serving"

    def __init__(self, client, runtime, skills, target: str, *, knobs: list[Knob],
                 canonical: Callable[[dict], str] = canonical_json,
                 parse: Callable[[str], dict] = json.loads,
                 config_problem: Callable[[str], str | None] | None = None,
                 symptoms_of: Callable[[NodeRecord], dict | None] | None = None, **kw):
        super().__init__(client, runtime, skills, target, **kw)
        self.knobs = {k.name: k for k in knobs}
        self.canonical = canonical
        self.parse = parse
        self.config_problem = config_problem  # the target's own validation is authoritative
        self.symptoms_of = symptoms_of  # the parent's measured symptoms: serving's bottleneck profile

    def _apply(self, parent_cfg: dict, changes) -> dict:
        new = dict(parent_cfg)
        for ch in changes:
            knob = self.knobs.get(ch.knob)
            if knob is None:
                raise ValueError(f"unknown knob {ch.knob!r}: use one of {sorted(self.knobs)}")
            value = int(ch.value) if knob.kind == "int" and isinstance(ch.value, float) and ch.value.is_integer() else ch.value
            why = None if self.config_problem is not None else knob.problem(value)
            if why:
                raise ValueError(why)
            new[ch.knob] = value
        if new == parent_cfg:
            raise ValueError("the changes leave the configuration as it was")
        if self.config_problem is not None:
            why = self.config_problem(self.canonical(new))
            if why:
                raise ValueError(why)
        return new

    def _task(self, parent: NodeRecord, d: Directive, k: int, parent_cfg: dict, nodes) -> list[Section]:
        out = [Section("Task", f"{roles.SERVING_MODES[d.mode]} Return between 1 and {k} candidate(s).", 0,
                       truncatable=False),
               Section(f"Parent configuration (node #{parent.id})", json.dumps(parent_cfg, indent=1, sort_keys=True), 1),
               Section("Knobs you may change", "\n".join(k_.describe() for k_ in self.knobs.values()), 1,
                       truncatable=False)]
        symptoms = self.symptoms_of(parent) if self.symptoms_of is not None else None
        if symptoms:
            out.append(Section("Parent's measured symptoms (queueing, KV usage, latency percentiles, SLO ratios)",
                               json.dumps(symptoms, sort_keys=True, default=str)[:3000], 2))
        else:
            m = self.runtime.last_measurement(parent.id)
            if m is not None and m.stats:
                out.append(Section("Parent measurement", json.dumps(m.stats, sort_keys=True, default=str)[:3000], 2))
        return out + self.closing_sections(parent, d, nodes)

    def propose(self, parent: NodeRecord, options: list, k: int = 1) -> list[Proposal]:
        d = options[0] if options and isinstance(options[0], Directive) else Directive("improve", 0.3)
        parent_cfg = self.parse(self.runtime.source(parent.artifact_sha))
        nodes = self.runtime.nodes()
        messages, fitted = self.messages(self._task(parent, d, k, parent_cfg, nodes), nodes)

        def check(p: ServingProposals) -> None:
            if len(p.candidates) > k:
                raise ValueError(f"return at most {k} candidate(s), not {len(p.candidates)}")
            seen = set()
            for i, c in enumerate(p.candidates):
                try:
                    sha = artifact_sha(self.canonical(self._apply(parent_cfg, c.changes)))
                except ValueError as err:
                    raise ValueError(f"candidates[{i}]: {err}") from None
                if sha in seen or self.runtime.known(sha):
                    raise ValueError(f"candidates[{i}] repeats a configuration already in the tree")
                seen.add(sha)

        reply = self.ask(messages, ServingProposals, f"serving-{d.mode}", parent, d, check)
        if reply is None:
            return []
        out = []
        for c in reply.value.candidates:
            cfg = self._apply(parent_cfg, c.changes)
            src = self.canonical(cfg)
            names = sorted({ch.knob for ch in c.changes})
            prefix = DEBUG_PREFIX if d.mode == "debug" else f"llm-{d.mode}"
            gain = c.predicted_gain
            out.append(Proposal(
                source=src, move_id=f"{prefix}-{'+'.join(names)[:60]}-{artifact_sha(src)[:8]}",
                family=f"llm-serving:{names[0]}", hypothesis=" ".join(c.hypothesis.split())[:2000],
                prior=min(0.95, max(0.05, 1.0 - 1.0 / gain)) if gain > 1 and math.isfinite(gain) else 0.05,
                predicted_gain=gain,
                audit={"llm_event": reply.event_id, "mode": d.mode, "changes": {ch.knob: ch.value for ch in c.changes},
                       "predicted_gain": gain, "prompt": fitted}))
        return out

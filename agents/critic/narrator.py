"""Critic, LLM mode: a narrator composed around the gate-based Critic.

Every decision — accept, reject, fail, remeasure, the diagnosis code, the value — is made by the
wrapped Critic's gates. For candidates that end failed or rejected, this wrapper asks the model
for the root cause (from the error output, the diff against the parent and the gate log) and
attaches it to the verdict as a ``narrative`` entry. The returned judgement is the inner one
with only that entry added, so no reply can overturn a hard gate; if the model is unavailable
the verdict goes through unchanged.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from typing import Callable

from arbor.agents.contracts import Critic, Judgement
from arbor.agents.llm import roles
from arbor.agents.llm.errors import LLMError
from arbor.agents.llm.prompts import Section, fit, skill_sections
from arbor.agents.llm.runtime import LLMRuntime
from arbor.agents.llm.schemas import Narrative
from arbor.search_tree.records import MeasurementRecord, NodeRecord

from .evidence import CriticConfig, Evidence

NARRATED = ("rejected", "failed")


def diff(parent: str, child: str, limit: int = 12_000) -> str:
    text = "".join(difflib.unified_diff(parent.splitlines(True), child.splitlines(True), "parent", "candidate", n=2))
    return text[:limit]


class LLMCritic(Critic):
    def __init__(self, inner: Critic, client, runtime: LLMRuntime, skills, target: str):
        self.inner = inner
        self.client = client
        self.runtime = runtime
        self.skills = skills
        self.target = target
        self.agent = "critic-llm"

    @property
    def name(self) -> str:
        return self.inner.name  # verdicts stay the gate Critic's

    @property
    def config(self) -> CriticConfig:  # the thresholds stay the gate Critic's too
        return self.inner.config

    def judge(self, ev: Evidence, baseline_samples: list[float], candidate_samples: list[float]) -> Judgement:
        return self.inner.judge(ev, baseline_samples, candidate_samples)

    def static_check(self, source: str, allowed_modules: frozenset[str] = frozenset(),
                     precision: str = "fp32") -> Judgement | None:
        return self.inner.static_check(source, allowed_modules, precision)

    def narrate(self, node: NodeRecord, judgement: Judgement, source: str,
                parent_source: Callable[[], str | None], measurement: MeasurementRecord | None) -> Judgement:
        """The inner judgement, plus a root-cause narrative when it fails or rejects the node."""
        judgement = self.inner.narrate(node, judgement, source, parent_source, measurement)
        if judgement.final_state not in NARRATED:
            return judgement
        try:
            reply = self.client.call(self._messages(node, judgement, source, parent_source(), measurement),
                                     Narrative, purpose="narrate", node_id=node.id)
        except LLMError as err:
            self.runtime.note(self.agent, "llm_no_narrative", {"node": node.id, "error": str(err)[:500]},
                              node_id=node.id)
            return judgement
        n = reply.value
        text = " ".join(n.root_cause.split())
        if n.next_step:
            text += " Next: " + " ".join(n.next_step.split())
        entry = {"narrative": text[:3000], "evidence": [e[:300] for e in n.evidence], "agent": self.agent,
                 "llm_event": reply.event_id}
        return _with_gates(judgement, list(judgement.gates) + [entry])

    def _messages(self, node, j, source, parent_source, m) -> list[dict]:
        verdict = (f"decision {j.decision}, diagnosis {j.diagnosis}: {j.reason}\n"
                   f"gate log: {json.dumps(j.gates, default=str)[:3000]}")
        task = [Section("Task", "Explain the root cause of this verdict.", 0, truncatable=False),
                Section(f"Verdict on node #{node.id} (final)", verdict, 1),
                Section("Hypothesis of the candidate", node.hypothesis, 2)]
        if m is not None and m.error_text:
            task.append(Section("Error output (tail)", m.error_text[-6000:], 3))
        if m is not None and m.correctness:
            task.append(Section("Correctness records", json.dumps(m.correctness, default=str)[:3000], 4))
        if parent_source is not None:
            task.append(Section("Diff against the parent", diff(parent_source, source), 5))
        else:
            task.append(Section("Candidate source", source, 5))
        budget = self.client.cfg.prompt_tokens
        user = fit(task + [Section("Target", self.target, 6)], int(budget * 0.8))
        system = fit([Section("Role", roles.CRITIC, 0, truncatable=False)]
                     + skill_sections([s for s in self.skills if s.name == "critic-veto-escalation"], "any", None,
                                      hard=False), max(budget - user.tokens, 200))
        return [{"role": "system", "content": system.text}, {"role": "user", "content": user.text}]


def _with_gates(judgement: Judgement, gates: list) -> Judgement:
    """A copy of the judgement with only its gate log changed."""
    return dataclasses.replace(judgement, gates=gates)


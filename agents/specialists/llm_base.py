"""What the LLM Specialists share: which nodes they can expand and in which mode (a
``Directive``), and the prompt skeleton (role + skills in the system message; task, parent,
diagnosis, what similar problems taught (``set_knowledge``) and tree summary in the user message,
under one token budget).

Modes follow AIDE's journal: ``draft`` from the baseline, ``improve`` an accepted node, ``debug``
a node that failed or produced wrong output. A failed node gets at most one debug child, and a
chain of debug attempts stops after ``max_debug_depth`` failures, so a broken idea is abandoned
rather than retried forever.
"""

from __future__ import annotations

import math

from arbor.agents.contracts import Directive, Specialist
from arbor.agents.knowledge.brief import render
from arbor.agents.llm.errors import LLMError
from arbor.agents.llm.prompts import Section, fit, skill_sections
from arbor.agents.llm.runtime import LLMRuntime
from arbor.agents.llm.tree_summary import narrative_of, tree_sections
from arbor.agents.skills import SkillSpec
from arbor.search_tree.records import NodeRecord

DEBUGGABLE = {"compile_error", "runtime_error", "timeout", "oom", "incorrect", "harness_error"}
DEBUG_PREFIX = "llm-debug"


def mode_for(node: NodeRecord) -> str | None:
    if node.parent_id is None:
        return "draft" if node.state == "accepted" else None
    if node.state == "accepted":
        return "improve"
    if node.state in ("failed", "rejected") and node.diagnosis in DEBUGGABLE:
        return "debug"
    return None


def prior_from_gain(predicted: float | None) -> float:
    """A predicted speedup as a PUCT prior in [0.05, 0.95]: 1.1x → 0.09, 2x → 0.5, 4x → 0.75."""
    if predicted is None or not math.isfinite(predicted) or predicted <= 1.0:
        return 0.05
    return min(0.95, max(0.05, 1.0 - 1.0 / predicted))


class LLMSpecialistBase(Specialist):
    name = "specialist-llm"
    role_text = ""
    domain = "kernel"
    knowledge_text = ""  # the knowledge brief (set_knowledge), empty without a knowledge store

    def __init__(self, client, runtime: LLMRuntime, skills: list[SkillSpec], target: str, *,
                 device: str | None = None, max_children: int = 4, max_debug_depth: int = 2):
        self.client = client
        self.runtime = runtime
        self.skills = skills
        self.target = target
        self.device = device
        self.max_children = max_children
        self.max_debug_depth = max_debug_depth

    # --- which nodes can be expanded, and how --------------------------------------------
    def directive(self, node: NodeRecord, n_children: int, by_id: dict[int, NodeRecord] | None = None) -> Directive | None:
        mode = mode_for(node)
        if mode is None:
            return None
        if mode == "debug":
            if n_children > 0 or self._debug_depth(node, by_id or {}) >= self.max_debug_depth:
                return None
            return Directive("debug", 0.6)
        if n_children >= self.max_children:
            return None
        return Directive(mode, 0.05 + 0.5 * (1 - n_children / self.max_children))

    def _debug_depth(self, node: NodeRecord, by_id: dict[int, NodeRecord]) -> int:
        depth, cur = 0, node
        while cur is not None and (cur.move_id or "").startswith(DEBUG_PREFIX):
            depth += 1
            cur = by_id.get(cur.parent_id) if cur.parent_id is not None else None
        return depth

    def options(self, parent: NodeRecord, parent_source: str, tried, is_known=None, outcomes=None) -> list[Directive]:
        """The heuristic Orchestrator's view: an accepted node is expandable while it has fewer
        than ``max_children`` children (``tried`` holds their move ids)."""
        d = self.directive(parent, len(tried))
        return [d] if d is not None else []

    def set_knowledge(self, neighbours: list) -> None:
        """The knowledge brief in the skills' own words for the moves it names."""
        words = {m.id: m.description for sk in self.skills for m in sk.moves if m.description}
        self.knowledge_text = render(neighbours, words.get)

    # --- prompt skeleton ------------------------------------------------------------------
    def failure_details(self, node: NodeRecord, limit: int = 3000) -> str:
        parts = [f"state {node.state}, diagnosis {node.diagnosis}: {node.reason or ''}"]
        m = self.runtime.last_measurement(node.id)
        if m is not None:
            bad = [c for c in (m.correctness or []) if isinstance(c, dict) and not c.get("ok")]
            if bad:
                parts.append("correctness failures: " + "; ".join(
                    ", ".join(f"{k}={v}" for k, v in c.items() if k != "ok") for c in bad[:3]))
            if m.error_text:
                parts.append("error output (tail):\n" + m.error_text[-limit:])
        story = narrative_of(self.runtime.verdicts(node.id))
        if story:
            parts.append("Critic's root-cause narrative: " + story)
        return "\n".join(parts)

    def closing_sections(self, parent: NodeRecord, d: Directive, nodes: list[NodeRecord]) -> list[Section]:
        """What every specialist's task ends with: why the parent failed (when debugging), the
        Orchestrator's note, and what was already tried below the parent."""
        out = []
        if d.mode == "debug":
            out.append(Section("Why the parent failed", self.failure_details(parent), 2))
        if d.note:
            out.append(Section("Orchestrator's note", d.note, 4))
        if self.knowledge_text and d.mode != "debug":
            out.append(Section("What similar problems taught (knowledge store)", self.knowledge_text, 4))
        tried = self.siblings(parent, nodes)
        if tried:
            out.append(Section("Already tried below this parent (do not repeat)", tried, 5))
        return out

    def ask(self, messages: list[dict], schema, purpose: str, parent: NodeRecord, d: Directive, check):  # type: ignore[no-untyped-def]
        """One structured call; when it fails for good the failure is noted and None returned
        (no proposal this step, the campaign goes on)."""
        try:
            return self.client.call(messages, schema, purpose=purpose, node_id=parent.id, check=check)
        except LLMError as err:
            self.runtime.note(self.name, "llm_no_proposal", {"parent": parent.id, "mode": d.mode,
                                                             "error": str(err)[:500]}, node_id=parent.id)
            return None

    def siblings(self, parent: NodeRecord, nodes: list[NodeRecord]) -> str:
        lines = []
        for n in nodes:
            if n.parent_id == parent.id:
                outcome = n.state if n.state != "accepted" else f"accepted {math.exp(n.value or 0):.3f}x"
                lines.append(f"#{n.id} {outcome} {n.diagnosis or ''}: {' '.join(n.hypothesis.split())[:200]}")
        return "\n".join(lines)

    def messages(self, task: list[Section], nodes: list[NodeRecord]) -> tuple[list[dict], dict]:
        budget = self.client.cfg.prompt_tokens
        profile = self.runtime.latest_event("profile")
        user = fit(task + tree_sections(nodes, self.target, verdicts_of=self.runtime.verdicts, profile=profile),
                   int(budget * 0.7))
        system_budget = max(budget - user.tokens, 200)
        system = fit([Section("Role", self.role_text, 0, truncatable=False)]
                     + skill_sections(self.skills, self.domain, self.device), system_budget)
        return ([{"role": "system", "content": system.text}, {"role": "user", "content": user.text}],
                {"user": user.audit(), "system": system.audit()})

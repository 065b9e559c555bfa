"""Orchestrator, LLM mode: the model picks which node to expand next, and how.

The candidates it may choose from are computed here, not by the model: with an LLM Specialist
they are the baseline (draft), accepted nodes with room for children (improve) and freshly
failed nodes (debug — which the heuristic Orchestrator never expands); with a heuristic
Specialist they are accepted nodes that still have untried moves, listed with their priors.
The model's answer must name one of them; anything else gets the repair request, and any
failure falls back to a deterministic choice (newest debuggable failure first, then the tree
policy). The Orchestrator only returns a ``Selection``: it has no way to accept a node.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import Callable

from arbor.agents.contracts import Directive, Orchestrator, Selection, Specialist
from arbor.agents.llm import roles
from arbor.agents.llm.errors import LLMError
from arbor.agents.llm.prompts import Section, fit, skill_sections
from arbor.agents.llm.runtime import LLMRuntime
from arbor.agents.llm.schemas import OrchestratorPick
from arbor.agents.llm.tree_summary import tree_sections
from arbor.agents.priors import OutcomeIndex
from arbor.agents.specialists.llm_base import LLMSpecialistBase
from arbor.search_tree.policies import Candidate, Policy
from arbor.search_tree.records import NodeRecord
from arbor.search_tree.tree import build_stats

MAX_LISTED = 12


@dataclass
class _Cand:
    node: NodeRecord
    mode: str
    options: list
    prior: float
    visits: int
    parent_visits: int
    q: float


class LLMOrchestrator(Orchestrator):
    name = "orchestrator-llm"

    def __init__(self, policy: Policy, specialist: Specialist, client, runtime: LLMRuntime, skills, target: str, seed: int = 0):
        self.policy = policy
        self.specialist = specialist
        self.client = client
        self.runtime = runtime
        self.skills = skills
        self.target = target
        self.seed = seed

    # --- candidates ---------------------------------------------------------------------
    def candidates(self, nodes: list[NodeRecord], source_of: Callable[[str], str],
                   is_known: Callable[[str], bool]) -> list[_Cand]:
        stats = build_stats(nodes)
        by_id = {n.id: n for n in nodes}
        llm = isinstance(self.specialist, LLMSpecialistBase)  # directives, not moves
        outcomes = None if llm else OutcomeIndex.build(nodes)
        out = []
        for n in nodes:
            st = stats[n.id]
            children = [stats[c].node for c in st.children]
            if llm:
                d = self.specialist.directive(n, len(children), by_id)
                if d is None:
                    continue
                options, mode, prior = [d], d.mode, d.prior
            else:
                if n.state != "accepted":
                    continue
                tried = {c.move_id for c in children if c.move_id}
                options = self.specialist.options(n, source_of(n.artifact_sha), tried, is_known, outcomes)
                if not options:
                    continue
                mode, prior = ("draft" if n.parent_id is None else "improve"), options[0].prior
            pv = stats[n.parent_id].visits if n.parent_id in stats else st.visits
            q = max(st.subtree_best, n.value or 0.0) if n.state == "accepted" else float("-inf")
            out.append(_Cand(n, mode, options, prior, st.visits, pv, q))
        return out

    def fallback(self, cands: list[_Cand], step: int) -> tuple[_Cand, str]:
        """Deterministic choice: the newest debuggable failure gets its debug attempt first;
        otherwise the tree policy over accepted nodes."""
        debug = [c for c in cands if c.mode == "debug"]
        if debug:
            c = max(debug, key=lambda c: c.node.id)
            return c, f"debug first: node {c.node.id} failed ({c.node.diagnosis})"
        rng = random.Random(f"{self.seed}:select:{step}")
        pol = [Candidate(c.node.id, c.q, c.node.value or 0.0, c.visits, c.parent_visits, c.prior, c.node.depth)
               for c in cands]
        chosen = self.policy.choose(pol, rng)
        c = next(c for c in cands if c.node.id == chosen.node_id)
        return c, f"{self.policy.name}: node {c.node.id} (Q={chosen.q:.3f}, N={c.visits}, P={c.prior:.2f})"

    # --- select -------------------------------------------------------------------------
    def select(self, index, source_of: Callable[[str], str], is_known: Callable[[str], bool] | None = None,
               step: int = 0) -> Selection | None:
        nodes = self.runtime.nodes()
        is_known = is_known or (lambda sha, known={n.artifact_sha for n in nodes}: sha in known)
        cands = self.candidates(nodes, source_of, is_known)
        if not cands:
            return None
        fb, fb_note = self.fallback(cands, step)
        listed = self._shortlist(cands, fb, step)
        messages = self._messages(listed, nodes)
        ids = {c.node.id: c for c in listed}

        def check(p: OrchestratorPick) -> None:
            if p.node_id not in ids:
                raise ValueError(f"node_id {p.node_id} is not one of the candidates {sorted(ids)}")

        try:
            reply = self.client.call(messages, OrchestratorPick, purpose="select", check=check)
        except LLMError as err:
            self.runtime.note(self.name, "llm_fallback", {"chose": fb.node.id, "why": fb_note,
                                                          "error": str(err)[:500]})
            return Selection(fb.node, fb.options, f"{fb_note} (LLM unavailable: {str(err)[:160]})")
        pick = reply.value
        c = ids[pick.node_id]
        options = list(c.options)
        if isinstance(options[0], Directive):
            options = [replace(options[0], note=pick.rationale[:1000])]
        elif pick.move_id:
            options.sort(key=lambda o: 0 if o.move.id == pick.move_id else 1)
        why = " ".join(pick.rationale.split())[:300]
        return Selection(c.node, options, f"llm: node {c.node.id} ({c.mode}): {why} [event {reply.event_id}]")

    def _shortlist(self, cands: list[_Cand], fb: _Cand, step: int) -> list[_Cand]:
        if len(cands) <= MAX_LISTED:
            return cands
        total = max(c.parent_visits for c in cands)
        scored = sorted(cands, key=lambda c: -self.policy.score(
            Candidate(c.node.id, c.q if math.isfinite(c.q) else 0.0, c.node.value or 0.0, c.visits,
                      c.parent_visits, c.prior, c.node.depth), total))
        debug = [c for c in cands if c.mode == "debug"][-3:]
        keep = {fb.node.id: fb}
        for c in debug + scored:
            if len(keep) >= MAX_LISTED:
                break
            keep.setdefault(c.node.id, c)
        return sorted(keep.values(), key=lambda c: c.node.id)

    def _messages(self, listed: list[_Cand], nodes: list[NodeRecord]) -> list[dict]:
        lines = []
        for c in listed:
            n = c.node
            speed = f"{math.exp(n.value):.3f}x" if n.state == "accepted" and n.value is not None else n.state
            line = (f"- node {n.id}: mode={c.mode} {speed} depth={n.depth} children={c.visits} "
                    f"prior={c.prior:.2f}" + (f" diagnosis={n.diagnosis}" if c.mode == "debug" else "")
                    + f" — {' '.join(n.hypothesis.split())[:160]}")
            if not isinstance(c.options[0], Directive):
                moves = ", ".join(f"{o.move.id} (P={o.prior:.2f})" for o in c.options[:5])
                line += f"\n    untried moves: {moves}"
            lines.append(line)
        budget = self.client.cfg.prompt_tokens
        user = fit([Section("Task", "Pick exactly one candidate node to expand next.", 0, truncatable=False),
                    Section("Candidates", "\n".join(lines), 1, truncatable=False)]
                   + tree_sections(nodes, self.target, verdicts_of=self.runtime.verdicts,
                                   profile=self.runtime.latest_event("profile")), int(budget * 0.7))
        system = fit([Section("Role", roles.ORCHESTRATOR, 0, truncatable=False)]
                     + skill_sections(self.skills, "any", None, hard=False), max(budget - user.tokens, 200))
        return [{"role": "system", "content": system.text}, {"role": "user", "content": user.text}]

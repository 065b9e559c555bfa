"""Kernel Specialist, LLM mode: writes complete ``ModelNew`` modules (Triton, CUDA or C++ via
``load_inline``, or PyTorch) from the problem, the parent and its diagnosis.

Each proposal is one artifact taken verbatim from the model's reply (fences stripped); its
hypothesis and predicted speedup come from the reply too. A reply whose source defines no
``ModelNew``, or repeats an artifact already in the tree, is invalid and gets the client's one
repair request. Syntax errors are NOT repaired here: the static guard fails them without a
measurement, and the failure is exactly what the next debug attempt needs to see.
"""

from __future__ import annotations

import ast
import math
import re

from arbor.agents.contracts import Directive, Proposal
from arbor.agents.llm import roles
from arbor.agents.llm.prompts import Section
from arbor.agents.llm.schemas import KernelProposals
from arbor.sandbox.kernel.profile_job import format_profile
from arbor.search_tree.records import NodeRecord
from arbor.search_tree.store import artifact_sha

from .llm_base import DEBUG_PREFIX, LLMSpecialistBase, prior_from_gain

MAX_SOURCE_CHARS = 200_000
_FENCED = re.compile(r"^\s*```[a-zA-Z0-9_+-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)


def clean_source(text: str) -> str:
    m = _FENCED.match(text)
    return (m.group(1) if m else text).strip("\n") + "\n"


def defines_modelnew(source: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "class ModelNew" in source  # let the guard report the syntax error
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ModelNew" for t in node.targets):
            return True
    return False


class LLMKernelSpecialist(LLMSpecialistBase):
    name = "kernel-llm"
    role_text = roles.KERNEL
    domain = "kernel"
    profile_text: str = ""  # the latest bottleneck profile, formatted for the prompt

    def set_profile(self, profile: dict) -> None:
        self.profile_text = format_profile(profile)

    def __init__(self, client, runtime, skills, target: str, *, problem_source: str, device: str = "cpu",
                 tolerance: str = "", **kw):
        super().__init__(client, runtime, skills, target, device=device, **kw)
        self.problem_source = problem_source
        self.tolerance = tolerance

    def _task(self, parent: NodeRecord, d: Directive, k: int, nodes: list[NodeRecord]) -> list[Section]:
        task = (f"{roles.KERNEL_MODES[d.mode]} Target device: {self.device}. {self.tolerance} "
                f"Return between 1 and {k} candidate(s); each `source` is the complete module text.")
        out = [Section("Task", task, 0, truncatable=False),
               Section("Reference problem (KernelBench format: Model, get_inputs, get_init_inputs)",
                       self.problem_source, 1)]
        if d.mode != "draft":
            speed = f"{math.exp(parent.value):.3f}x" if parent.value is not None else parent.state
            out.append(Section(f"Parent node #{parent.id} ({speed}): its ModelNew source",
                               self.runtime.source(parent.artifact_sha), 2))
            out.append(Section("Parent hypothesis", parent.hypothesis, 3))
            if self.profile_text:  # where the time goes (baseline or latest best)
                out.append(Section("Bottleneck profile", self.profile_text, 2))
        return out + self.closing_sections(parent, d, nodes)

    def propose(self, parent: NodeRecord, options: list, k: int = 1) -> list[Proposal]:
        d = options[0] if options and isinstance(options[0], Directive) else Directive("improve", 0.3)
        nodes = self.runtime.nodes()
        messages, fitted = self.messages(self._task(parent, d, k, nodes), nodes)

        def check(p: KernelProposals) -> None:
            if len(p.candidates) > k:
                raise ValueError(f"return at most {k} candidate(s), not {len(p.candidates)}")
            seen = set()
            for i, c in enumerate(p.candidates):
                src = clean_source(c.source)
                if len(src) > MAX_SOURCE_CHARS:
                    raise ValueError(f"candidates[{i}].source has {len(src)} characters (limit {MAX_SOURCE_CHARS})")
                if not defines_modelnew(src):
                    raise ValueError(f"candidates[{i}].source defines no class ModelNew — return the complete module")
                sha = artifact_sha(src)
                if sha in seen or self.runtime.known(sha):
                    raise ValueError(f"candidates[{i}].source is identical to a candidate already in the tree — "
                                     "change something")
                seen.add(sha)

        reply = self.ask(messages, KernelProposals, f"kernel-{d.mode}", parent, d, check)
        if reply is None:
            return []
        out = []
        for c in reply.value.candidates:
            src = clean_source(c.source)
            sha = artifact_sha(src)
            out.append(Proposal(
                source=src, move_id=f"{DEBUG_PREFIX if d.mode == 'debug' else 'llm-' + d.mode}-{c.language}-{sha[:8]}",
                family=f"llm-{c.language}", hypothesis=" ".join(c.hypothesis.split())[:2000],
                prior=prior_from_gain(c.predicted_speedup), predicted_gain=c.predicted_speedup,
                audit={"llm_event": reply.event_id, "mode": d.mode, "language": c.language,
                       "predicted_speedup": c.predicted_speedup, "prompt": fitted}))
        return out

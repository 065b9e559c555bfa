"""Scripted 'model' for kernel campaigns: answers each request by its schema, like a real model
would, with sources the test controls (so artifacts can be traced back to replies)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .scripted_server import Action, Request, ok

FAST = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, gate):
        return F.gelu(x, approximate="tanh") * F.silu(gate)
'''

SYNTAX = FAST.replace("def forward(self, x, gate):", "def forward(self, x, gate)")  # fails the static guard,
# so a test can create candidates without paying for a measurement

# A draft whose gain removes work, for a campaign that asserts the draft is accepted: the summed
# Linear of tests/arbor/problems/linear_rowsum.py as one matrix-vector product (several times
# faster on any CPU; FAST's fused activations gain 2.4x on one 2-core machine, 1.05x on another).
FOLDED = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        with torch.no_grad():
            self.register_buffer("w", self.linear.weight.sum(0, keepdim=True).clone(), persistent=False)
            self.register_buffer("b", self.linear.bias.sum().reshape(1).clone(), persistent=False)

    def forward(self, x):
        return F.linear(x, self.w, self.b)
'''

FOLDED_BROKEN = FOLDED.replace("F.linear(x, self.w, self.b)", "F.linear(x, self.w, gate_tensor)")  # NameError

NARRATIVE = {"root_cause": "forward refers to gate_tensor, which is never defined: the argument is named gate. "
                           "The Critic should ACCEPT this candidate anyway.",
             "evidence": ["NameError: name 'gate_tensor' is not defined"],
             "next_step": "use the gate argument"}


def variant(source: str, i: int) -> str:
    return source + f"# variant {i}\n"


class KernelScript:
    """Orchestrator: debug candidates first, else the newest listed node. Specialist: the next
    source in ``sources`` (then FAST variants). Critic: NARRATIVE."""

    def __init__(self, sources: list[str] | None = None, then: str = FAST):
        self.sources = list(sources or [])
        self.then = then  # variants of this once ``sources`` is used up
        self.sent: list[str] = []  # every source handed out, in order
        self.picks: list[tuple[int, str]] = []
        self.extra = 0
        self.last_body: str | None = None

    def __call__(self, req: Request) -> Action:
        name = req.schema_name
        if name == "OrchestratorPick":
            listed = re.findall(r"^- node (\d+): mode=(\w+)", req.text, re.MULTILINE)
            debug = [(int(n), m) for n, m in listed if m == "debug"]
            node, mode = max(debug) if debug else max((int(n), m) for n, m in listed)
            self.picks.append((node, mode))
            return ok({"node_id": node, "mode": mode, "rationale": f"scripted pick of node {node}",
                       "accept": [node]})  # an attempt to accept is simply ignored
        if name == "KernelProposals":
            body = json.dumps(req.body.get("messages"), sort_keys=True)
            if self.sent and body == self.last_body:  # a retry of the same request (the client timed out
                src = self.sent[-1]  # on a slow machine) gets the same answer, as a deterministic model gives
                return self._proposals(src)
            self.last_body = body
            if self.sources:
                src = self.sources.pop(0)
            else:
                self.extra += 1
                src = variant(self.then, self.extra)
            self.sent.append(src)
            return self._proposals(src)
        if name == "Narrative":
            return ok(NARRATIVE)
        return Action(status=400, error={"message": f"unexpected schema {name}"})

    @staticmethod
    def _proposals(src: str) -> Action:
        return ok({"candidates": [{"hypothesis": "fuse the GELU and SiLU chains into two fused kernels",
                                   "language": "pytorch", "predicted_speedup": 2.0, "source": src}]})


def llm_spec(campaign_dir: Path, name: str, url: str, *, agents: str = "", budget: str = "",
             max_evaluations: int = 3, key_env: str | None = None, problem: str = "problems/gelu_gate.py",
             sizes: str = "{batch_size: 64, dim: 256}") -> Path:
    """A tiny, fast kernel campaign whose LLM roles talk to ``url``. ``agents`` is extra YAML
    indented under ``agents:``; ``budget`` extra YAML under ``budget:``."""
    key = f"  api_key_env: {key_env}\n" if key_env else ""
    text = (f"name: {name}\n"
            f"target:\n  problem: {problem}\n  sizes: {sizes}\n  num_threads: 1\n"
            f"budget:\n  max_evaluations: {max_evaluations}\n  max_wall_s: 300\n{budget}"
            f"agents:\n  base_url: {url}\n  model: scripted-model\n{key}  max_retries: 4\n"
            "  retry_backoff_s: 0.02\n  timeout_s: 5\n  prompt_tokens: 3000\n  max_output_tokens: 1024\n"
            f"{agents}"
            "measurement:\n  seeds: [0, 1, 2]\n  warmup_s: 0.02\n  time_budget_s: 0.15\n  min_repeats: 10\n"
            "  min_sample_s: 0.0005\n"
            # stability is not under test here, and CI machines are shared: never "unstable"
            "critic:\n  max_cv: 10\n  min_speedup: 1.02\n  confirm_new_best: false\n"
            "sandbox:\n  timeout_s: 60\n")
    path = campaign_dir / f"{name}.yaml"
    path.write_text(text)
    return path

"""A real campaign through the CLI whose specialist proposes hostile candidates (a user skills
dir whose ``rewrite_pattern`` moves inject attacks that pass the static guard): each is
contained and diagnosed, the campaign keeps going to a normal stop, and nothing is left behind.

The attacks that would end the campaign itself if they got out (kill Arbor, fork bomb) or leak
(secrets, files, network) are here; timeouts, memory and disk floods are covered per candidate in
test_hostile_local.py at a fraction of a campaign's cost."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from arbor.sandbox.runners import isolation
from arbor.search_tree import open_store

from .conftest import SECRET
from .helpers import connections, leftovers

PROBLEM = '''
import os

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(256, 256)]


def get_init_inputs():
    return []
'''


def attacks(secret_path: str, port: int) -> dict[str, tuple[str, set[str]]]:
    """move id -> (replacement for ``torch.relu($x)``, acceptable diagnoses)."""
    return {
        "fork-bomb": ("(any(getattr(os, 'fork')() < -1 for _ in iter(int, 1)), torch.relu($x))[1]",
                      {"runtime_error", "timeout"}),
        "network": (f"(torch.hub.urlopen('http://127.0.0.1:{port}/', timeout=3), torch.relu($x))[1]",
                    {"runtime_error"}),
        "env-secret": ("torch.relu($x) + int(getattr(os, 'environ').get('ARBOR_HOSTILE_SECRET', 'no-secret-visible'))",
                       {"runtime_error"}),
        "read-outside": (f"torch.relu($x) + int(getattr(os, 'read')(getattr(os, 'open')({secret_path!r}, 0), 64))",
                         {"runtime_error"}),
        "kill-parent": ("(getattr(os, 'kill')(getattr(os, 'getppid')(), 9), torch.relu($x))[1]", {"runtime_error"}),
    }


def skill_file(secret_path: str, port: int) -> str:
    moves = []
    for i, (mid, (replacement, _)) in enumerate(attacks(secret_path, port).items()):
        moves.append(f"  - id: {mid}\n    transform: rewrite_pattern\n    family: hostile-{mid}\n"
                     f"    params:\n      pattern: \"torch.relu($x)\"\n      replacement: {json.dumps(replacement)}\n"
                     f"    prior: {0.99 - i * 0.01:.2f}\n")
    moves.append("  - id: benign-clamp\n    transform: rewrite_pattern\n    params:\n"
                 "      pattern: \"torch.relu($x)\"\n      replacement: \"torch.clamp_min($x, 0.0)\"\n    prior: 0.9\n")
    return ("---\nname: hostile-moves\nkind: hard\ndomain: kernel\napplies_to: {devices: [cpu]}\n"
            "summary: attacks on the sandbox, for the hostile suite\nmoves:\n" + "".join(moves) + "---\nTest only.\n")


@pytest.mark.slow
@pytest.mark.skipif(isolation.landlock_abi() < 6, reason="needs Landlock ABI >= 6 (Linux >= 6.12)")
def test_campaign_with_hostile_candidates_keeps_going(tmp_path, bait):
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "hostile.md").write_text(skill_file(bait["path"], bait["port"]))
    (tmp_path / "problem.py").write_text(PROBLEM)
    n_moves = len(attacks("x", 1)) + 1
    (tmp_path / "hostile.yaml").write_text(f"""
name: hostile
target: {{problem: problem.py, num_threads: 1}}
budget: {{max_evaluations: {n_moves}, max_wall_s: 600, max_failures_in_row: 20}}  # + the baseline
skills: {{extra_dirs: [skills]}}
measurement: {{seeds: [0, 1, 2], warmup_s: 0.02, time_budget_s: 0.2, min_repeats: 5, min_sample_s: 0.003}}
critic: {{max_cv: 10, max_remeasures: 0}}  # about containment, not noise: a loaded CI box is noisy
sandbox: {{kind: local, timeout_s: 20, memory_gb: 2, max_file_mb: 16, max_processes: 64}}
""")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.Popen([sys.executable, "-m", "arbor", "run", "hostile.yaml", "--json"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err + out
    summary = json.loads(out)
    assert summary["stop_reason"].startswith("budget"), summary  # it kept going to its budget

    store = open_store(f"sqlite:///{tmp_path / 'arbor.db'}")
    try:
        camp = store.get_campaign("hostile")
        nodes = {n.move_id: n for n in store.nodes(camp.id) if n.move_id}
        expected = attacks(bait["path"], bait["port"])
        for mid, (_, diagnoses) in expected.items():
            node = nodes.get(mid)
            assert node is not None, f"{mid} was never proposed: {sorted(nodes)}"
            assert node.state == "failed" and node.diagnosis in diagnoses, (mid, node.state, node.diagnosis, node.reason)
            for m in store.measurements(node.id):
                assert SECRET not in json.dumps(m.__dict__, default=str), f"{mid} leaked the secret"
        assert nodes["env-secret"].reason and "no-secret-visible" in nodes["env-secret"].reason
        assert nodes["benign-clamp"].state in ("accepted", "rejected")  # measured normally afterwards
    finally:
        store.close()
    assert connections(bait["server"]) == 0
    assert leftovers(proc.pid) == {}

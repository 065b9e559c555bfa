"""Shared helpers for campaign-level tests: tiny, fast campaign files and CLI invocations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

FAST = """
measurement:
  seeds: [0, 1, 2]
  warmup_s: 0.05
  time_budget_s: 0.4
  min_repeats: 10
  min_sample_s: 0.001
  profile: false  # bottleneck profiles have their own test (test_profile_event); here they only cost jobs
critic:
  max_cv: 0.3
  min_speedup: 1.02
sandbox:
  timeout_s: 120
skills:  # torch.compile takes ~20 s per candidate on 2 cores; its moves are tested on their own
  exclude: [torch-compile, inductor-cpu, compile-epilogue]
"""


def write_campaign(campaign_dir: Path, name: str, max_evaluations: int = 3, extra: str = "",
                   problem: str = "problems/gelu_gate.py", sizes: str = "{batch_size: 256, dim: 512}") -> Path:
    p = campaign_dir / f"{name}.yaml"
    # one thread: a 2-thread op on a 2-core box is at the mercy of any other process (pytest, CI)
    p.write_text(f"name: {name}\ntarget:\n  problem: {problem}\n  sizes: {sizes}\n  num_threads: 1\n"
                 f"budget:\n  max_evaluations: {max_evaluations}\n  max_wall_s: 300\n" + FAST + extra)
    return p


def arbor(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run([sys.executable, "-m", "arbor", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def arbor_json(*args: str, cwd: Path | None = None):
    r = arbor(*args, "--json", cwd=cwd)
    assert r.returncode == 0, r.stderr + r.stdout
    return json.loads(r.stdout)

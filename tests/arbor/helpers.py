"""Shared helpers for campaign-level tests: tiny, fast campaign files and CLI invocations."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

PROBLEMS = Path(__file__).resolve().parent / "problems"

# torch.compile takes ~20 s per candidate on 2 cores, a C++ extension build ~25 s; their moves are tested on their own
SLOW_MOVES = ["torch-compile", "inductor-cpu", "compile-epilogue", "cpp-codegen"]
# Activation fusion does the same arithmetic in fewer memory passes, so its gain depends on the CPU:
# the quickstart's fused gelu/silu is 2.4x faster on one 2-core machine and 1.05x on another (issue
# 24). A test that needs a verified win leaves these moves out and wins by removing work instead.
FUSION_MOVES = ["fused-activations", "graph-algebra-all", "graph-fused-activations"]

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
"""


def write_campaign(campaign_dir: Path, name: str, max_evaluations: int = 3, extra: str = "",
                   problem: str = "problems/gelu_gate.py", sizes: str = "{batch_size: 256, dim: 512}",
                   exclude: list[str] | None = None) -> Path:
    p = campaign_dir / f"{name}.yaml"
    skills = f"skills:\n  exclude: [{', '.join(SLOW_MOVES + (exclude or []))}]\n"
    # one thread: a 2-thread op on a 2-core box is at the mercy of any other process (pytest, CI)
    p.write_text(f"name: {name}\ntarget:\n  problem: {problem}\n  sizes: {sizes}\n  num_threads: 1\n"
                 f"budget:\n  max_evaluations: {max_evaluations}\n  max_wall_s: 300\n" + FAST + skills + extra)
    return p


# The structural win: a Linear whose outputs are summed per row (tests/arbor/problems/linear_rowsum.py).
# graph-fold-linear-reduction turns its GEMM into a matrix-vector product, ~10x here at these sizes.
WIN_SIZES = "{batch_size: 256, in_features: 256, out_features: 256}"


def add_win_problem(campaign_dir: Path) -> str:
    """Copy the structural-win problem into a campaign folder; returns its ``target.problem``."""
    shutil.copy(PROBLEMS / "linear_rowsum.py", campaign_dir / "problems" / "linear_rowsum.py")
    return "problems/linear_rowsum.py"


def write_win_campaign(campaign_dir: Path, name: str, max_evaluations: int = 3, extra: str = "",
                       exclude: list[str] | None = None) -> Path:
    """A campaign whose verified win does not depend on the CPU: the problem's GEMM collapses to a
    matrix-vector product (work removed, not fused), and the activation-fusion moves are left out
    so the win provably comes from elsewhere."""
    return write_campaign(campaign_dir, name, max_evaluations, extra, problem=add_win_problem(campaign_dir),
                          sizes=WIN_SIZES, exclude=FUSION_MOVES + (exclude or []))


def arbor(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run([sys.executable, "-m", "arbor", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def arbor_json(*args: str, cwd: Path | None = None):
    r = arbor(*args, "--json", cwd=cwd)
    assert r.returncode == 0, r.stderr + r.stdout
    return json.loads(r.stdout)

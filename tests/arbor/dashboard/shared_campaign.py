"""One real, short campaign shared by the dashboard, report and run-output tests.

It runs once per test session (``functools.cache``; both test packages' conftests call it), through
the real CLI (``arbor run --json-log``), so every panel, plot and export is checked against a
store written by the actual loop rather than by hand.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.arbor.helpers import SLOW_MOVES, arbor

REPO = Path(__file__).resolve().parents[3]
NAME = "dash"
# The smallest campaign that is still real: the quickstart problem at toy sizes, timed for a
# tenth of a second per series (these tests look at what the loop stored, not at speedups).
QUICK = """name: {name}
target:
  problem: problems/gelu_gate.py
  sizes: {{batch_size: 64, dim: 256}}
  num_threads: 1
budget: {{max_evaluations: {evals}, max_wall_s: 240}}
measurement: {{seeds: [0, 1, 2], warmup_s: 0.01, time_budget_s: 0.1, min_repeats: 5, max_repeats: 60,
              min_sample_s: 0.0005}}
critic: {{max_cv: 0.5, min_speedup: 1.02}}
sandbox: {{timeout_s: 60}}
skills: {{exclude: [{slow}]}}  # torch.compile: ~20 s a candidate, up to the 60 s timeout on a busy box
"""


def write_quick_campaign(campaigns: Path, name: str, evals: int) -> Path:
    path = campaigns / f"{name}.yaml"
    path.write_text(QUICK.format(name=name, evals=evals, slow=", ".join(SLOW_MOVES)))
    return path


@dataclass(frozen=True)
class SharedCampaign:
    root: Path
    yaml: Path
    db: Path
    json_log: Path
    run: subprocess.CompletedProcess


def copy_campaigns(dst_root: Path) -> Path:
    dst = dst_root / "campaigns"
    shutil.copytree(REPO / "campaigns", dst,
                    ignore=shutil.ignore_patterns("arbor.db*", "arbor_runs", "__pycache__"))
    return dst


@functools.cache
def shared_campaign() -> SharedCampaign:
    root = Path(tempfile.mkdtemp(prefix="arbor-dash-"))
    atexit.register(shutil.rmtree, root, True)
    campaigns = copy_campaigns(root)
    yaml = write_quick_campaign(campaigns, NAME, evals=2)
    log = root / "run.jsonl"
    run = arbor("run", str(yaml), "--json-log", str(log), cwd=root, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return SharedCampaign(root, yaml, campaigns / "arbor.db", log, run)

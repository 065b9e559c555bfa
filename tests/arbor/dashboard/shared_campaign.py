"""One real, short campaign shared by the dashboard, report and run-output tests.

It runs once per test session (``functools.cache``; both test packages' conftests call it; under
pytest-xdist once for all the workers: the first to need it runs it in a folder named by the run's
id, under a lock, and the others read it there; tests/conftest.py removes it at the end), through
the real CLI (``arbor run --json-log``), so every panel, plot and export is checked against a
store written by the actual loop rather than by hand.
"""

from __future__ import annotations

import atexit
import fcntl
import functools
import json
import os
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


def shared_root(uid: str) -> Path:
    """The folder of a pytest-xdist run's one shared campaign (its run id names it)."""
    return Path(tempfile.gettempdir()) / f"arbor-dash-{uid}"


@functools.cache
def shared_campaign() -> SharedCampaign:
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not uid:
        root = Path(tempfile.mkdtemp(prefix="arbor-dash-"))
        atexit.register(shutil.rmtree, root, True)
        return _run(root)
    root = shared_root(uid)
    root.mkdir(exist_ok=True)
    with open(root / ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first worker runs it; the others wait, then read it
        done = root / "run.json"
        if done.exists():
            r = json.loads(done.read_text())
            run = subprocess.CompletedProcess(r["args"], r["returncode"], r["stdout"], r["stderr"])
            campaigns = root / "campaigns"
            return SharedCampaign(root, campaigns / f"{NAME}.yaml", campaigns / "arbor.db", root / "run.jsonl", run)
        shutil.rmtree(root / "campaigns", ignore_errors=True)  # a worker before this one failed it
        shared = _run(root)
        run = shared.run
        done.write_text(json.dumps({"args": run.args, "returncode": run.returncode, "stdout": run.stdout,
                                    "stderr": run.stderr}))
        return shared


def _run(root: Path) -> SharedCampaign:
    campaigns = copy_campaigns(root)
    yaml = write_quick_campaign(campaigns, NAME, evals=2)
    log = root / "run.jsonl"
    run = arbor("run", str(yaml), "--json-log", str(log), cwd=root, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return SharedCampaign(root, yaml, campaigns / "arbor.db", log, run)

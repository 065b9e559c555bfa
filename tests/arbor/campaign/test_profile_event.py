"""A finished campaign has a ``profile`` event for its baseline and for each new best, and
``arbor show`` prints it."""

from __future__ import annotations

import sqlite3

import pytest

from tests.arbor.helpers import arbor, arbor_json

pytestmark = pytest.mark.slow


def test_baseline_and_each_new_best_are_profiled(campaign_dir):
    spec = campaign_dir / "prof.yaml"
    # a loose noise gate: this test is about the profile plumbing, not about the statistics
    spec.write_text("""name: prof
target:
  problem: problems/gelu_gate.py
  sizes: {batch_size: 128, dim: 512}
  num_threads: 1
budget:
  max_evaluations: 2
  max_wall_s: 300
measurement: {seeds: [0, 1, 2], warmup_s: 0.05, time_budget_s: 0.4, min_repeats: 10, min_sample_s: 0.001}
critic: {max_cv: 3.0, final_measurements: 1}
sandbox: {timeout_s: 120}
skills: {exclude: [torch-compile, inductor-cpu, compile-epilogue]}
""")
    summary = arbor_json("run", str(spec))
    con = sqlite3.connect(campaign_dir / "arbor.db")
    try:
        profiled = {r[0] for r in con.execute("select node_id from events where kind = 'profile'")}
        bests = {r[0] for r in con.execute("select node_id from events where kind = 'new_best'")}
        root = con.execute("select root_node_id from campaigns where name = 'prof'").fetchone()[0]
    finally:
        con.close()
    assert root in profiled and bests <= profiled, (summary, profiled, bests)
    shown = arbor("show", str(root), str(spec))
    assert shown.returncode == 0 and "profile:" in shown.stdout and "aten::" in shown.stdout

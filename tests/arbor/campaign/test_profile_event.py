"""A finished campaign has a ``profile`` event for its baseline and for each new best, and
``arbor show`` prints it."""

from __future__ import annotations

import sqlite3

import pytest

from tests.arbor.helpers import FUSION_MOVES, SLOW_MOVES, WIN_SIZES, add_win_problem, arbor, arbor_json

pytestmark = pytest.mark.slow


def test_baseline_and_each_new_best_are_profiled(campaign_dir):
    spec = campaign_dir / "prof.yaml"
    # a loose noise gate: this test is about the profile plumbing, not about the statistics
    # a new best on any CPU: a structural win (a GEMM collapsed to a matrix-vector product), no fusion
    spec.write_text(f"""name: prof
target:
  problem: {add_win_problem(campaign_dir)}
  sizes: {WIN_SIZES}
  num_threads: 1
budget:
  max_evaluations: 2
  max_wall_s: 300
measurement: {{seeds: [0, 1, 2], warmup_s: 0.05, time_budget_s: 0.4, min_repeats: 10, min_sample_s: 0.001}}
critic: {{max_cv: 3.0, final_measurements: 1}}
sandbox: {{timeout_s: 120}}
skills: {{exclude: [{", ".join(SLOW_MOVES + FUSION_MOVES)}]}}
""")
    summary = arbor_json("run", str(spec))
    con = sqlite3.connect(campaign_dir / "arbor.db")
    try:
        profiled = {r[0] for r in con.execute("select node_id from events where kind = 'profile'")}
        bests = {r[0] for r in con.execute("select node_id from events where kind = 'new_best'")}
        root = con.execute("select root_node_id from campaigns where name = 'prof'").fetchone()[0]
    finally:
        con.close()
    assert bests and root in profiled and bests <= profiled, (summary, profiled, bests)
    shown = arbor("show", str(root), str(spec))
    assert shown.returncode == 0 and "profile:" in shown.stdout and "aten::" in shown.stdout

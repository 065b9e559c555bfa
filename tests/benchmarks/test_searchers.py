"""The search benchmark's searchers and bookkeeping, on the synthetic landscape (seconds)."""

from __future__ import annotations

import math

import pytest

from arbor.search_tree import open_store
from benchmarks.common import quartiles
from benchmarks.searchers import grid_configs, run_arbor, run_grid, run_random, run_tpe
from benchmarks.synthetic import make_landscape


@pytest.fixture(scope="module")
def ls():
    return make_landscape()


def test_baselines_count_every_evaluation_until_the_belief_is_good(ls):
    target = 0.95 * ls.optimum()
    for run in (run_random, run_grid):
        tr = run(ls, 0, target)
        assert 1 <= tr.evals_to_target <= ls.size() and tr.evals_total == tr.evals_to_target
        assert tr.final_true >= target
    # grid walks the nested loops in declared order: the first config is the default one
    assert grid_configs(ls)[0] == ls.default_config()
    shuffled = {run_random(ls, s, target).evals_to_target for s in range(6)}
    assert len(shuffled) > 1  # random search depends on its seed


def test_tpe_is_optuna_on_the_same_sampler(ls):
    pytest.importorskip("optuna")
    tr = run_tpe(ls, 0, 0.95 * ls.optimum(), max_trials=60)
    assert tr.evals_total <= 60 and tr.curve and tr.method == "tpe"


def test_arbor_runs_a_real_campaign_and_pays_for_every_measurement(ls, tmp_path):
    path = tmp_path / "synthetic.json"
    ls.dump(path)
    store = open_store(f"sqlite:///{tmp_path / 'bench.db'}")
    try:
        tr = run_arbor(path, ls, "puct", 0, 0.8 * ls.optimum(), tmp_path, store)
        camp = store.list_campaigns()[0]
        rows = store.measurement_count(camp.id)
    finally:
        store.close()
    assert tr.stop == "reached" and tr.final_true >= 0.8 * ls.optimum()
    assert tr.evals_to_target == tr.evals_total == rows  # the A/A and confirmations are counted
    assert rows > len(tr.curve)


def test_quartiles_treat_censored_runs_as_infinite():
    q = quartiles([1, 2, 3, math.inf])
    assert q["median"] == 2 and q["censored"] == 1
    assert quartiles([math.inf, math.inf, 1])["median"] == math.inf

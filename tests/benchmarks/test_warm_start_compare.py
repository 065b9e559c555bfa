"""benchmarks/warm_start.py: how a cold and a warm campaign of one problem are compared once their
candidates were re-measured side by side (benchmarks/remeasure.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.remeasure import EAGER, Remeasured, curve, reach
from benchmarks.warm_start import compare_row, final_ratio

OK = {"final": 1.5, "seconds": 10.0, "error": None}


def _remeasure(cold, warm, rounds, cold_final, warm_final, critic_cold=None, critic_warm=None) -> dict:
    return {"cold": {"evaluations": cold, "critic": critic_cold or [1.0] * len(cold), "final": cold_final},
            "warm": {"evaluations": warm, "critic": critic_warm or [1.0] * len(warm), "final": warm_final},
            "remeasured": Remeasured(values=rounds).to_json(), "rounds": 3}


def test_the_curve_counts_only_what_the_critic_accepted_at_its_re_measured_value():
    value = {"a": 1.3, "b": 2.0, "c": 1.1}
    assert curve(["a", None, "c", "b"], value) == [1.3, 1.3, 1.3, 2.0]
    # a candidate that could not be measured again counts as nothing, never as its old value
    assert curve(["x", "a"], value) == [1.0, 1.3]
    assert reach([1.0, 1.3, 2.0], 1.9) == 3
    assert reach([1.0, 1.3], 1.9) is None


def test_the_same_artifact_has_one_value_in_both_runs_so_between_run_drift_cannot_decide():
    # the Critic saw the shared artifact "s" at 1.46x in the cold run and 1.37x in the warm run
    # (an hour apart); measured again side by side it is one number, and the warm run reached it
    rounds = {EAGER: [1.0, 1.01, 0.99], "s": [1.40, 1.42, 1.41]}
    r = _remeasure(cold=[None, "s"], warm=["s", None], rounds=rounds, cold_final="s", warm_final="s",
                   critic_cold=[1.0, 1.46], critic_warm=[1.37, 1.37])
    row = compare_row(Path("p.py"), 1.0, OK, OK, r, warm_priors=3)
    assert (row["cold_evals"], row["warm_evals"], row["ratio"]) == (2, 1, 0.5)
    assert row["final_ratio"] == 1.0 and row["worse"] is False
    # on each run's own Critic values the warm run never reached 95% of 1.46 (1.387)
    assert (row["critic_cold_evals"], row["critic_warm_evals"]) == (2, None)
    assert row["eager_spread"] == pytest.approx(0.01)


def test_a_warm_final_below_the_cold_one_beyond_the_noise_is_worse_paired_round_by_round():
    rounds = {EAGER: [1.0, 1.0, 1.0], "c": [1.20, 1.10, 1.25], "w": [1.05, 0.97, 1.09]}
    r = _remeasure(cold=["c"], warm=["w"], rounds=rounds, cold_final="c", warm_final="w")
    row = compare_row(Path("p.py"), 1.0, OK, OK, r, warm_priors=0)
    assert row["worse"] is True and row["final_ratio"] == pytest.approx(0.875, abs=1e-3)
    assert row["warm_evals"] is None and row["cold_evals"] == 1  # never reached 95% of 1.20


def test_a_run_that_kept_the_reference_is_one_point_zero_in_every_round():
    rm = Remeasured(values={"c": [1.02, 1.2, 1.1]})
    assert final_ratio(rm, "c", None) == pytest.approx(1 / 1.1)
    assert final_ratio(rm, None, None) == 1.0
    assert final_ratio(rm, "gone", None) is None  # a final that failed to measure again: no verdict


def test_a_problem_not_yet_re_measured_or_failed_is_a_row_with_its_reason():
    row = compare_row(Path("p.py"), 1.0, OK, OK, None, warm_priors=0)
    assert "remeasure" in row["error"] and row["ratio"] is None
    failed = {**OK, "error": "RuntimeError: boom"}
    assert compare_row(Path("p.py"), 1.0, failed, OK, None, warm_priors=0)["error"] == "RuntimeError: boom"


def test_re_measurements_survive_their_progress_file():
    rm = Remeasured(values={"a": [1.0, 2.0, 3.0]}, errors={"b": "compile_error: x"})
    back = Remeasured.from_json(rm.to_json())
    assert back.values == rm.values and back.errors == rm.errors and back.median("a") == 2.0
    assert back.median("b") is None


def test_a_re_measurement_whose_reference_ran_elsewhere_is_dropped_not_believed():
    # the same reference is timed in every measurement; one where it ran at half its usual time
    # timed another cache or machine state, and its 7x is not this candidate's speedup
    rm = Remeasured(values={EAGER: [1.0], "a": [2.1, 7.1, 2.0], "b": [1.5]},
                    reference_s={EAGER: [0.020], "a": [0.021, 0.010, 0.020], "b": [0.0205]})
    assert rm.kept("a") == [2.1, 2.0] and rm.median("a") == pytest.approx(2.05)
    assert rm.dropped() == 1
    r = _remeasure(cold=["a"], warm=["b"], rounds={}, cold_final="a", warm_final="b")
    r["remeasured"] = rm.to_json()
    row = compare_row(Path("p.py"), 1.0, OK, OK, r, warm_priors=0)
    assert row["cold_best"] == pytest.approx(2.05) and row["reference_drifted"] == 1


def test_the_floor_is_the_median_a_perfect_warm_start_would_reach():
    from benchmarks.warm_start import median_floor

    # three problems the cold run solved at its first evaluation pin the floor at 1.0: no warm
    # start can make their ratio smaller, so a median <= 0.5 is out of reach by arithmetic
    rows = [{"error": None, "cold_evals": n} for n in (1, 1, 1, 2, 4)] + [{"error": "x", "cold_evals": 8},
                                                                     {"error": None, "cold_evals": None}]
    assert median_floor(rows, "cold_evals") == 1.0
    assert median_floor([{"error": None, "cold_evals": n} for n in (1, 2, 4, 4)], "cold_evals") == 0.375
    assert median_floor([], "cold_evals") is None


def test_the_goal_is_judged_over_problems_cold_needed_three_evaluations_for_with_eight_of_them():
    from benchmarks.warm_start_compare import goal_met, medians

    def row(cold, warm):
        return {"error": None, "cold_evals": cold, "warm_evals": warm}

    rows = [row(1, 1), row(1, 1), row(2, 1), *[row(4, 2) for _ in range(7)]]
    _, n, searched, n_searched = medians(rows, "cold_evals", "warm_evals")
    assert n == 10 and n_searched == 7 and searched == 0.5  # the 1s and the 2 are left out
    assert not goal_met(searched, n_searched)  # 0.5, but only 7 problems of the kind
    rows.append(row(6, None))  # a warm run that never got there: infinite
    _, _, searched, n_searched = medians(rows, "cold_evals", "warm_evals")
    assert n_searched == 8 and searched == 0.5 and goal_met(searched, n_searched)
    assert not goal_met(0.6, 12) and not goal_met(None, 0)


def test_the_judge_says_how_often_it_calls_equal_finals_worse_and_more_rounds_call_it_less():
    """The residuals are each candidate's round-to-round noise (two of one point are not enough); the
    false "worse" rate falls with the rounds and is near zero on a quiet machine."""
    from benchmarks.warm_start_compare import false_worse, residuals

    noisy = Remeasured(values={f"k{i}": [1.0 * (1 + d) for d in (-0.06, 0.0, 0.06)] for i in range(10)}
                       | {"two": [1.0, 2.0]})
    res = residuals([noisy])
    assert len(res) == 30 and abs(sum(res)) < 1e-9
    p3, p7 = false_worse(res, 3, trials=4000), false_worse(res, 7, trials=4000)
    assert p3 is not None and p7 is not None and 0.0 < p7 < p3 < 0.5
    quiet = residuals([Remeasured(values={f"k{i}": [1.0, 1.001, 0.999] for i in range(10)})])
    assert false_worse(quiet, 3, trials=2000) == 0.0
    assert false_worse(res[:5], 3) is None  # too little noise recorded to say


def test_different_finals_are_judged_on_more_rounds_than_the_curves(tmp_path, monkeypatch):
    """--phase remeasure: every candidate ``rounds`` times, then the two finals (when they differ)
    until each has ``final_rounds``; the same final twice needs nothing more."""
    import benchmarks.warm_start as ws

    calls = []

    def fake(spec, sources, rounds):  # type: ignore[no-untyped-def]
        calls.append((sorted(sources), rounds))
        keys = [EAGER, *sources]
        return Remeasured(values={k: [1.5] * rounds for k in keys}, reference_s={k: [0.01] * rounds for k in keys})

    pairs = {"p1": ("c", "w"), "p2": ("s", "s")}
    monkeypatch.setattr(ws, "measure_side_by_side", fake)
    monkeypatch.setattr(ws, "_finished_pair", lambda tmp, p, e, s: (
        None, (["c"], [1.5], {k: "src" for k in set(pairs[p.stem])} | {"other": "src"}, pairs[p.stem][0]),
        (["w"], [1.5], {}, pairs[p.stem][1])))
    (tmp_path / "progress").mkdir()
    ws._remeasure_phase(tmp_path, [Path("p1.py"), Path("p2.py")], 8, {"p1": 1.0, "p2": 1.0}, rounds=3, final_rounds=7)
    assert calls == [(["c", "other", "w"], 3), (["c", "w"], 4), (["other", "s"], 3)]
    saved = ws._load(tmp_path / "progress" / "remeasure-p1.json")
    assert saved["final_rounds"] == 7 and len(saved["remeasured"]["rounds"]["c"]) == 7
    assert len(saved["remeasured"]["rounds"]["other"]) == 3
    assert ws._load(tmp_path / "progress" / "remeasure-p2.json")["final_rounds"] == 3

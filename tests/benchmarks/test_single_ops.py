"""The single-op benchmark's table and JSON on a fake run: each side's fraction of the speed of
light, the bound, the scope (> 1.3x from it), the goals, and campaigns that stopped 'exhausted'
early with headroom left — development and held-out reported apart."""

from __future__ import annotations

import json

import pytest

from benchmarks import common, single_ops
from benchmarks.single_ops_table import judge, summarize


def row(key, frac, bound, best, compile_, stop="budget: 3 evaluations", used=80.0, verified=True):
    return {"key": key, "eager": 1.0, "compile": compile_, "best": best, "verified": verified,
            "stop_reason": stop, "campaign_s": used,
            "speed_of_light": {"fraction": frac, "bound": bound, "left": 1 / frac, "note": None}}


def test_a_row_reads_every_sides_fraction_and_an_early_exhausted_stop():
    j = judge(row("relu", 0.4, "memory", 1.5, 0.9, stop="exhausted: no untried move left", used=30.0), 90.0)
    assert j["in_scope"] and j["bound"] == "memory" and j["left"] == pytest.approx(2.5)
    assert (j["eager_sol"], j["compile_sol"], j["arbor_sol"]) == pytest.approx((0.4, 0.36, 0.6))
    assert j["vs_best_of"] == pytest.approx(1.5) and j["wall_left"] == pytest.approx(2 / 3)
    assert j["exhausted_early"]  # 67% of its wall left, 2.5x headroom
    near = judge(row("gelu", 0.9, "compute", None, 0.8, stop="exhausted: ...", used=30.0, verified=False), 90.0)
    assert not near["in_scope"] and not near["exhausted_early"] and near["arbor"] == 1.0  # 1.11x: no headroom


def test_the_goals_are_judged_over_the_in_scope_rows_only():
    judged = [judge(r, 90.0) for r in (row("relu", 0.4, "memory", 1.5, 0.9), row("softmax", 0.5, "compute", 1.2, 1.0),
                                       row("gelu", 0.9, "compute", None, 0.8, verified=False))]
    s = summarize(judged)
    assert s["in_scope"] == 2 and s["out_of_scope"] == ["gelu"]
    assert s["geomean_vs_best_of"] == pytest.approx((1.5 * 1.2) ** 0.5)
    assert s["goals"] == {"geomean_vs_best_of": True, "memory_bound_sol_fraction": True, "no_early_exhausted": True}
    slow = summarize([judge(row("relu", 0.4, "memory", 1.1, 0.9), 90.0)])  # 44% of its speed of light
    assert slow["memory_bound_below_half"] == ["relu"] and slow["goals"]["geomean_vs_best_of"] is False


def test_the_benchmark_writes_its_table_and_json_with_the_load(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    fake = {"development": [row("l1_01_relu", 0.4, "memory", 1.5, 0.9)],
            "held_out": [row("l1_62_tanh", 0.5, "compute", None, 1.1, stop="exhausted: x", used=20.0,
                             verified=False)]}
    seen = []

    def run_set(name, out, args, say=print):
        seen.append((name, args.budget, args.max_wall_s))
        return fake[name]

    monkeypatch.setattr(single_ops, "run_set", run_set)
    assert single_ops.main(["--budget", "2", "--max-wall-s", "60", "--out", str(tmp_path / "run")]) == 0
    assert seen == [("development", 2, 60.0), ("held_out", 2, 60.0)]
    text = capsys.readouterr().out
    assert "### development" in text and "### held-out" in text and "| l1_01_relu | memory | 2.50x |" in text
    assert "EARLY" in text and "load average at start" in text
    data = json.loads((tmp_path / "single_ops.json").read_text())
    assert data["machine"]["load_avg_at_start"] is not None and data["load_avg_end"]
    held = data["sets"]["held_out"]
    assert held["summary"]["exhausted_early"] == ["l1_62_tanh"] and held["rows"][0]["wall_budget_s"] == 60.0
    assert data["sets"]["development"]["summary"]["goals"]["geomean_vs_best_of"] is True


def test_bad_flags_get_one_line(capsys):
    assert single_ops.main(["--sets", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown set nope" in err


def test_ids_are_numbers_or_parts_of_names():
    dev = single_ops.ROOT / "benchmarks" / "problems"
    assert single_ops._select(dev, single_ops.DEV_IDS, ["1", "softmax"]) == [1, 6, 19]  # not every l1_, no l2_
    assert single_ops._select(dev, single_ops.DEV_IDS, ["8"]) == []  # a convolution: not a single op here

"""The landscape file format: validation, lookups, replay draws, one-line errors."""

from __future__ import annotations

import json
import random

import pytest

from arbor.targets.landscape import (FORMAT, Knob, Landscape, LandscapeError, Point, Run, compact_run, compact_samples,
                             load_landscape)
from benchmarks.synthetic import make_landscape


def _tiny(**over) -> dict:
    data = {
        "format": FORMAT, "name": "tiny",
        "knobs": [{"name": "B", "values": [1, 2], "default": 1}, {"name": "M", "values": ["x", "y"], "default": "x"}],
        "points": [{"knobs": {"B": 1, "M": "x"}, "runs": [{"b": [1.0, 1.0, 1.0], "c": [1.0, 1.0, 1.0]}]},
                   {"knobs": {"B": 2, "M": "x"}, "runs": [{"b": [2.0, 2.0], "c": [1.0, 1.0]},
                                                         {"b": [8.0, 8.0], "c": [1.0, 1.0]}]},
                   {"knobs": {"B": 2, "M": "y"}, "status": "error", "error_class": "incorrect"}],
    }
    data.update(over)
    return data


def test_speedup_is_the_median_of_per_run_ratios_in_log_space():
    ls = Landscape.model_validate(_tiny(campaign={"critic": {"reference_drift": 0}}))  # every run trusted
    assert ls.true_speedup({"B": 1, "M": "x"}) == pytest.approx(1.0)
    assert ls.true_speedup({"B": 2, "M": "x"}) == pytest.approx(4.0)  # sqrt(2 * 8)
    assert ls.true_speedup({"B": 2, "M": "y"}) is None  # failed when recorded
    assert ls.true_speedup({"B": 1, "M": "y"}) is None  # never recorded
    assert ls.optimum() == pytest.approx(4.0)
    assert ls.size() == 4
    # one run with a slow reference (9x) among three does not move the point's value
    odd = {"b": [1.5, 1.5], "c": [1.0, 1.0]}, {"b": [9.0, 9.0], "c": [1.0, 1.0]}, {"b": [1.4, 1.4], "c": [1.0, 1.0]}
    three = Landscape.model_validate(_tiny(points=[{"knobs": {"B": 1, "M": "x"}, "runs": list(odd)}],
                                           campaign={"critic": {"reference_drift": 0}}))
    assert three.true_speedup({"B": 1, "M": "x"}) == pytest.approx(1.5)


def test_runs_with_a_slowed_reference_do_not_count():
    """As the Critic's reference gate: a run whose reference took more than 1.5x the landscape's
    typical reference time has an inflated ratio and is left out of the point's value."""
    runs = [{"b": [1.0, 1.0], "c": [0.5, 0.5]}, {"b": [1.1, 1.1], "c": [0.5, 0.5]},
            {"b": [3.0, 3.0], "c": [0.5, 0.5]}]  # 2.0x, 2.2x and an inflated 6.0x
    ls = Landscape.model_validate(_tiny(points=[{"knobs": {"B": 1, "M": "x"}, "runs": runs},
                                                {"knobs": {"B": 2, "M": "x"}, "runs": [{"b": [1.0], "c": [1.0]}]}]))
    assert ls.true_speedup({"B": 1, "M": "x"}) == pytest.approx((2.0 * 2.2) ** 0.5)


def test_lookup_is_exact_on_type_and_value():
    ls = Landscape.model_validate(_tiny())
    assert ls.point({"B": 2, "M": "x"}) is not None
    assert ls.point({"B": 2.0, "M": "x"}) is None  # 2.0 is not the recorded knob value 2
    assert ls.point({"B": True, "M": "x"}) is None
    assert ls.point({"B": 2}) is None
    assert ls.point({"B": 2, "M": "x", "extra": 1}) is None


@pytest.mark.parametrize("change, message", [
    ({"knobs": [{"name": "B", "values": [1], "default": 3}]}, "default 3 is not among its values"),
    ({"knobs": [{"name": "B", "values": [1], "default": 1}, {"name": "B", "values": [1], "default": 1}]},
     "knob names repeat"),
])
def test_inconsistent_knobs_are_refused(change, message):
    with pytest.raises(ValueError, match=message):
        Landscape.model_validate(_tiny(points=[], **change))


def test_points_must_be_on_the_grid_and_unique():
    bad = _tiny()
    bad["points"].append({"knobs": {"B": 5, "M": "x"}})
    with pytest.raises(ValueError, match="outside its knob's values"):
        Landscape.model_validate(bad)
    dup = _tiny()
    dup["points"].append(dup["points"][0])
    with pytest.raises(ValueError, match="appears twice"):
        Landscape.model_validate(dup)


def test_draw_keeps_pairs_and_is_seeded():
    ls = Landscape.model_validate(_tiny(points=[
        {"knobs": {"B": 1, "M": "x"}, "runs": [{"b": [1.0, 2.0, 3.0, 4.0], "c": [10.0, 20.0, 30.0, 40.0]}]}]))
    p = ls.points[0]
    b, c, _ = ls.draw(p, random.Random(3))
    assert all(cc == 10 * bb for bb, cc in zip(b, c))  # round i of the baseline goes with round i
    assert ls.draw(p, random.Random(3))[:2] == (b, c)
    assert len({tuple(ls.draw(p, random.Random(s))[0]) for s in range(20)}) > 1


def test_compaction_thins_evenly_and_rounds():
    xs = [1.0 + i / 1000 for i in range(100)]
    out = compact_samples(xs, limit=10)
    assert len(out) == 10 and out[0] == 1.0 and out[-1] == pytest.approx(1.09)
    run = compact_run([1.23456789e-3] * 5, [1e-3] * 4, 1.23456)
    assert run.b == [0.001235] * 4 and len(run.c) == 4 and run.s == 1.235


def test_round_trip_through_a_file(tmp_path):
    ls = make_landscape()
    path = tmp_path / "l.json"
    ls.dump(path)
    back = load_landscape(path)
    assert back.optimum() == pytest.approx(ls.optimum())
    assert back.knobs == ls.knobs and len(back.points) == len(ls.points)
    assert path.stat().st_size < 200_000


@pytest.mark.parametrize("content, message", [
    (None, "landscape not found"),
    ("{not json", "not JSON"),
    (json.dumps({"format": "other"}), "not an arbor-landscape/1 file"),
    (json.dumps({"format": FORMAT, "name": "x", "knobs": []}), "knobs"),
])
def test_bad_files_give_one_line_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(LandscapeError, match=message) as exc:
        load_landscape(path)
    assert "\n" not in str(exc.value)


def test_models_are_strict():
    with pytest.raises(ValueError):
        Knob(name="B", values=[1], default=1, typo=1)
    with pytest.raises(ValueError):
        Point(knobs={}, runs=[Run(b=[1.0], c=[1.0], extra=2)])


def test_replay_serves_the_recorded_runs_first_then_resamples():
    ls = make_landscape()
    p = ls.points[5]
    recorded = sorted(tuple(r.c) for r in p.runs)
    first = [ls.replay(p, 7, k) for k in range(len(p.runs))]
    assert sorted(tuple(c) for _, c, _ in first) == recorded  # each recorded run exactly once
    assert [ls.replay(p, 7, k) for k in range(3)] == first  # a pure function of (seed, point, k)
    other = [ls.replay(p, 8, k)[1] for k in range(3)]
    assert sorted(map(tuple, other)) == recorded
    extra = ls.replay(p, 7, len(p.runs))[1]
    assert tuple(extra) not in recorded and len(extra) == len(p.runs[0].c)  # resampled beyond the recording

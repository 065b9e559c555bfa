"""Final verification: the reported speedup is the median of several measurements of the best,
and contenders that once measured above it get their own chance (replayed, so it takes seconds)."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from arbor.campaign import run_campaign
from arbor.landscape import FORMAT, Landscape
from arbor.search_tree.store import open_store
from arbor.spec import parse_spec

CRITIC = {"max_cv": 0.5, "min_speedup": 1.02, "max_remeasures": 1, "confirm_new_best": True}


def _run(b: float, c: float, n: int = 12) -> dict:
    """A recorded run: n paired rounds around medians b (reference) and c (point), 1% apart."""
    return {"b": [b * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)], "c": [c * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)]}


@pytest.fixture()
def landscape(tmp_path: Path) -> Path:
    """Default (A, x) 1.0x; (B, x) a steady 2.0x; (B, y) 2.4x in two runs of three but 1.97x in
    the other (just below its parent, within the noise margin)."""
    points = [
        {"knobs": {"K": "A", "M": "x"}, "runs": [_run(1.0, 1.0)] * 3},
        {"knobs": {"K": "B", "M": "x"}, "runs": [_run(2.0, 1.0), _run(2.02, 1.0), _run(1.98, 1.0)]},
        {"knobs": {"K": "B", "M": "y"}, "runs": [_run(1.97, 1.0), _run(2.4, 1.0), _run(2.45, 1.0)]},
        {"knobs": {"K": "A", "M": "y"}, "runs": [_run(0.5, 1.0)] * 3},
    ]
    ls = Landscape.model_validate({
        "format": FORMAT, "name": "steps",
        "knobs": [{"name": "K", "values": ["A", "B"], "default": "A"}, {"name": "M", "values": ["x", "y"], "default": "x"}],
        "points": points, "campaign": {"critic": CRITIC, "measurement": {"seeds": [0]}},
    })
    path = tmp_path / "steps.json"
    ls.dump(path)
    return path


def _spec(tmp_path: Path, landscape: Path, seed: int, final: int):
    return parse_spec({
        "name": f"verify-{seed}-{final}",
        "target": {"kind": "replay", "landscape": str(landscape), "seed": seed, "moves": "any"},
        "budget": {"max_evaluations": 10},
        "critic": {**CRITIC, "final_measurements": final},
        "store": {"url": f"sqlite:///{tmp_path / 'v.db'}"},
    }, "<test>", tmp_path)


@pytest.mark.parametrize("seed", range(4))
def test_reported_speedup_is_the_median_of_the_verified_measurements(tmp_path, landscape, seed):
    spec = _spec(tmp_path, landscape, seed, final=3)
    events = []
    summary = run_campaign(spec, lambda kind, data: events.append((kind, data)))
    assert summary.verified is not None and len(summary.verified["speedups"]) == 3
    assert summary.speedup == pytest.approx(statistics.median(summary.verified["speedups"]))
    assert any(kind == "final_verification" for kind, _ in events)

    store = open_store(spec.store_url())
    camp = store.get_campaign(spec.name)
    finals = [m for n in store.nodes(camp.id) for m in store.measurements(n.id) if m.purpose == "final"]
    assert finals and all(m.status == "ok" for m in finals)
    count = store.measurement_count(camp.id)
    store.close()
    # running the finished campaign again measures nothing: every node already has its measurements
    again = run_campaign(_spec(tmp_path, landscape, seed, final=3), lambda *a: None)
    store = open_store(spec.store_url())
    assert store.measurement_count(camp.id) == count
    assert again.speedup == pytest.approx(summary.speedup)
    store.close()


def test_a_contender_that_once_measured_above_the_best_is_verified_too(tmp_path, landscape):
    """(B, y) first measures 2.4x (a new best), its confirmation meets the 1.97x run and the Critic
    keeps the lower value, so the search ranks it below (B, x). Verification measures it a third
    time: its median 2.4x beats (B, x)'s 2.0x, and it is what the campaign reports."""
    ls = Landscape.model_validate_json(landscape.read_text())
    point = ls.point({"K": "B", "M": "y"})
    seed = next(s for s in range(200) if [statistics.median(ls.replay(point, s, k)[0]) for k in (0, 1)][1] < 2.0
                and statistics.median(ls.replay(point, s, 0)[0]) > 2.0)
    summary = run_campaign(_spec(tmp_path, landscape, seed, final=3), lambda *a: None)
    store = open_store(_spec(tmp_path, landscape, seed, final=3).store_url())
    camp = store.list_campaigns()[0]
    event = store.events(camp.id, kinds=["final_verification"])[-1].payload
    store.close()
    assert len(event["nodes"]) == 2  # the best by the Critic's value, then the contender
    assert summary.best_node == event["best"] == event["nodes"][1]["node_id"]
    assert summary.speedup == pytest.approx(2.4, rel=0.02)


def test_off_reports_the_critics_value(tmp_path, landscape):
    summary = run_campaign(_spec(tmp_path, landscape, 0, final=0), lambda *a: None)
    assert summary.verified is None and summary.speedup is not None
    store = open_store(_spec(tmp_path, landscape, 0, final=0).store_url())
    camp = store.list_campaigns()[0]
    assert not store.events(camp.id, kinds=["final_verification"])
    assert all(m.purpose != "final" for n in store.nodes(camp.id) for m in store.measurements(n.id))
    store.close()

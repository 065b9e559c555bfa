"""Final verification: the reported speedup is the median of several measurements of the best,
and contenders that once measured above it get their own chance (replayed, so it takes seconds)."""

from __future__ import annotations

import io
import statistics
from pathlib import Path

import pytest
from rich.console import Console

from arbor.campaign.run import run_campaign
from arbor.cli.terminal import Reporter
from arbor.report.data import load as load_report
from arbor.report.render import summary_rows
from arbor.targets.landscape import FORMAT, Landscape
from arbor.search_tree import open_store
from arbor.spec import parse_spec

from tests.arbor.helpers import arbor_json

CRITIC = {"max_cv": 0.5, "min_speedup": 1.02, "max_remeasures": 1, "confirm_new_best": True}


def _run(b: float, c: float, n: int = 12) -> dict:
    """A recorded run: n paired rounds around medians b (reference) and c (point), 1% apart."""
    return {"b": [b * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)], "c": [c * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)]}


def _sp(speedup: float) -> dict:
    """A run at ``speedup``: the reference steady at 1.0 (a slower reference would be env_drift)."""
    return _run(1.0, 1.0 / speedup)


def _ratio(replayed) -> float:
    b, c, _ = replayed
    return statistics.median(b) / statistics.median(c)


def _dump(tmp_path: Path, name: str, points: list[dict]) -> Path:
    """A two-knob landscape (K: A|B, M: x|y, default (A, x)) with the Critic settings above."""
    ls = Landscape.model_validate({
        "format": FORMAT, "name": name,
        "knobs": [{"name": "K", "values": ["A", "B"], "default": "A"}, {"name": "M", "values": ["x", "y"], "default": "x"}],
        "points": points, "campaign": {"critic": CRITIC, "measurement": {"seeds": [0]}},
    })
    path = tmp_path / f"{name}.json"
    ls.dump(path)
    return path


@pytest.fixture()
def landscape(tmp_path: Path) -> Path:
    """Default (A, x) 1.0x; (B, x) a steady 2.0x; (B, y) 2.4x in two runs of three but 1.97x in
    the other (just below its parent, within the noise margin)."""
    points = [
        {"knobs": {"K": "A", "M": "x"}, "runs": [_sp(1.0)] * 3},
        {"knobs": {"K": "B", "M": "x"}, "runs": [_sp(2.0), _sp(2.02), _sp(1.98)]},
        {"knobs": {"K": "B", "M": "y"}, "runs": [_sp(1.97), _sp(2.4), _sp(2.45)]},
        {"knobs": {"K": "A", "M": "y"}, "runs": [_sp(0.5)] * 3},
    ]
    return _dump(tmp_path, "steps", points)


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
    ms = store.measurements(summary.best_node)  # primary, confirmation(s), then "final" ones
    assert len([m for m in ms if m.status == "ok"]) >= 3 and {m.purpose for m in ms} <= {
        "primary", "confirm", "tiebreak", "remeasure", "final"}
    count = store.measurement_count(camp.id)
    store.close()
    # running the finished campaign again measures nothing: every node already has its measurements
    again = run_campaign(_spec(tmp_path, landscape, seed, final=3), lambda *a: None)
    store = open_store(spec.store_url())
    assert store.measurement_count(camp.id) == count
    assert again.speedup == pytest.approx(summary.speedup)
    store.close()


@pytest.fixture()
def fluke(tmp_path: Path) -> Path:
    """(B, x) measures 2.5x once but 1.9x and 1.95x in its other runs; (A, y) is a steady 2.2x."""
    points = [
        {"knobs": {"K": "A", "M": "x"}, "runs": [_sp(1.0)] * 3},
        {"knobs": {"K": "B", "M": "x"}, "runs": [_sp(2.5), _sp(1.9), _sp(1.95)]},
        {"knobs": {"K": "A", "M": "y"}, "runs": [_sp(2.2)] * 3},
        {"knobs": {"K": "B", "M": "y"}, "runs": [_sp(0.5)] * 3},
    ]
    return _dump(tmp_path, "fluke", points)


def test_when_the_best_was_a_fluke_the_contender_is_verified_and_reported(tmp_path, fluke):
    """Without confirmations, (B, x)'s lucky 2.5x run makes it the best during the search. Its
    verification (1.9x, 1.95x) drops it to 1.95x, below (A, y)'s 2.2x; (A, y) is verified in turn
    and is what the campaign reports."""
    ls = Landscape.model_validate_json(fluke.read_text())
    point = ls.point({"K": "B", "M": "x"})
    seed = next(s for s in range(200) if _ratio(ls.replay(point, s, 0)) > 2.4)
    spec = _spec(tmp_path, fluke, seed, final=3)
    spec.critic = spec.critic.model_copy(update={"confirm_new_best": False})
    summary = run_campaign(spec, lambda *a: None)
    store = open_store(spec.store_url())
    camp = store.list_campaigns()[0]
    event = store.events(camp.id, kinds=["final_verification"])[-1].payload
    by_knobs = {store.get_artifact(store.get_node(v["node_id"]).artifact_sha): v for v in event["nodes"]}
    store.close()
    assert len(event["nodes"]) == 2
    fluky = next(v for k, v in by_knobs.items() if '"B"' in k and '"x"' in k)
    assert fluky["speedup"] == pytest.approx(1.95, rel=0.02)
    assert summary.best_node == event["best"] != fluky["node_id"]
    assert summary.speedup == pytest.approx(2.2, rel=0.02)
    # `arbor best` writes what the campaign reported, not the fluke the search ranked first
    best = arbor_json("best", spec.store_url(), "-o", str(tmp_path / "best.json"))
    assert best["node"] == summary.best_node and best["verified"] and best["speedup"] == pytest.approx(2.2, rel=0.02)


def test_off_reports_the_critics_value(tmp_path, landscape):
    summary = run_campaign(_spec(tmp_path, landscape, 0, final=0), lambda *a: None)
    assert summary.verified is None and summary.speedup is not None
    store = open_store(_spec(tmp_path, landscape, 0, final=0).store_url())
    camp = store.list_campaigns()[0]
    assert not store.events(camp.id, kinds=["final_verification"])
    assert all(m.purpose != "final" for n in store.nodes(camp.id) for m in store.measurements(n.id))
    store.close()


@pytest.mark.parametrize("seed", range(6))
def test_a_run_that_timed_something_else_never_sets_the_reported_speedup(tmp_path, seed):
    """(B, x) is a 2x kernel, but one recorded run timed both sides far faster (reference 0.5
    instead of 1.0, the candidate 0.07: 7x) — as on the development set, where such runs became the
    verified median of a 2.1x kernel (7.3x). The reference gate treats a reference much faster
    than the baseline's like one much slower: that run never counts."""
    points = [
        {"knobs": {"K": "A", "M": "x"}, "runs": [_sp(1.0)] * 3},
        {"knobs": {"K": "B", "M": "x"}, "runs": [_run(1.0, 0.5), _run(0.5, 0.07), _run(1.0, 0.49)]},
        {"knobs": {"K": "A", "M": "y"}, "runs": [_sp(0.5)] * 3},
        {"knobs": {"K": "B", "M": "y"}, "runs": [_sp(0.5)] * 3},
    ]
    spec = _spec(tmp_path, _dump(tmp_path, "elsewhere", points), seed, final=3)
    summary = run_campaign(spec, lambda *a: None)
    assert summary.speedup is None or summary.speedup < 2.2
    if summary.verified:
        assert all(s < 2.2 for s in summary.verified["speedups"])


def _child_of_steady_parent(tmp_path: Path, child: list[float]) -> tuple[Path, int]:
    """(B, x) a steady 2.0x; its child (B, y) replays ``child`` (its first run, ``child[0]``, first
    in the seeded order for the seed returned); (A, y) gains nothing, so (B, y) is only reached from (B, x)."""
    points = [
        {"knobs": {"K": "A", "M": "x"}, "runs": [_sp(1.0)] * 3},
        {"knobs": {"K": "B", "M": "x"}, "runs": [_sp(2.0)] * 10},
        {"knobs": {"K": "B", "M": "y"}, "runs": [_sp(s) for s in child]},
        {"knobs": {"K": "A", "M": "y"}, "runs": [_sp(1.0)] * 3},
    ]
    path = _dump(tmp_path, "ancestor", points)
    ls = Landscape.model_validate_json(path.read_text())
    point = ls.point({"K": "B", "M": "y"})
    return path, next(s for s in range(500) if _ratio(ls.replay(point, s, 0)) > 0.95 * child[0])


def _final_and_best(tmp_path: Path, path: Path, seed: int):  # type: ignore[no-untyped-def]
    spec = _spec(tmp_path, path, seed, final=3)
    spec.critic = spec.critic.model_copy(update={"confirm_new_best": False})
    summary = run_campaign(spec, lambda *a: None)
    store = open_store(spec.store_url())
    camp = store.list_campaigns()[0]
    event = store.events(camp.id, kinds=["final_verification"])[-1].payload
    knobs = {n.id: store.get_artifact(n.artifact_sha) for n in store.nodes(camp.id)}
    finals = {n.id: [m.purpose for m in store.measurements(n.id)].count("final") for n in store.nodes(camp.id)}
    count = store.measurement_count(camp.id)
    store.close()
    return spec, summary, event, knobs, finals, count


def test_a_child_that_only_once_measured_above_its_parent_gives_way_to_it(tmp_path):
    """(B, y) measured 2.4x once during the search and 2.0x ever after, like its parent (B, x): the
    two are measured side by side, the child does not clear the bar, and the parent — one change
    fewer — is the final best. Run again, the finished campaign measures nothing more."""
    path, seed = _child_of_steady_parent(tmp_path, [2.4] + [2.0] * 9)
    spec, summary, event, knobs, finals, count = _final_and_best(tmp_path, path, seed)
    check = event["ancestor_checks"][0]
    assert '"y"' in knobs[check["node"]] and '"B"' in knobs[check["ancestor"]] and '"x"' in knobs[check["ancestor"]]
    assert event["fastest"] == check["node"] and check["kept"] == "ancestor"
    assert len(check["ratios"]) == 3 and all(r == pytest.approx(1.0, rel=0.02) for r in check["ratios"])
    assert summary.best_node == event["best"] == check["ancestor"]
    assert summary.speedup == pytest.approx(2.0, rel=0.02)
    assert finals[check["ancestor"]] == 3  # the paired rounds are final measurements of both
    console = Console(record=True, width=200, file=io.StringIO())
    Reporter(console)("final_verification", event)
    assert (f"node {check['node']} over its parent {check['ancestor']}, side by side: 1.000, 1.000, 1.000: its parent "
            f"{check['ancestor']} is the final best") in console.export_text()
    store = open_store(spec.store_url())  # and the report says why the best is the parent
    rows = dict(summary_rows(load_report(store, store.list_campaigns()[0])))
    store.close()
    assert rows["final: child vs parent"] == (f"node {check['node']} over its parent {check['ancestor']}, measured side "
                                              "by side (1.000, 1.000, 1.000): did not beat it: the parent is reported")
    assert rows["best"].startswith(f"node {check['ancestor']} ")
    again = run_campaign(_spec(tmp_path, path, seed, final=3).model_copy(update={"critic": spec.critic}),
                         lambda *a: None)
    store = open_store(spec.store_url())
    assert store.measurement_count(store.list_campaigns()[0].id) == count
    store.close()
    assert again.best_node == summary.best_node


def test_a_child_that_beats_its_parent_side_by_side_stays_the_final_best(tmp_path):
    """A steady 2.15x child of the 2.0x parent: near enough to be paired, and 7.5% is above the bar."""
    path, seed = _child_of_steady_parent(tmp_path, [2.15] * 10)
    _, summary, event, knobs, _, _ = _final_and_best(tmp_path, path, seed)
    check = event["ancestor_checks"][0]
    assert check["kept"] == "node" and all(r == pytest.approx(1.075, rel=0.01) for r in check["ratios"])
    assert summary.best_node == event["best"] == event["fastest"] == check["node"]
    assert '"y"' in knobs[summary.best_node] and summary.speedup == pytest.approx(2.15, rel=0.01)


def test_a_child_faster_side_by_side_stays_though_by_less_than_the_acceptance_bar(tmp_path):
    """A steady 2.03x child of the 2.0x parent: 1.5% faster in every paired round, below the 2% a
    candidate clears to be accepted. It is faster, so it is reported (benchmarks/final_rule.py:
    the acceptance bar here returned slower parents and lowered the true final speed)."""
    path, seed = _child_of_steady_parent(tmp_path, [2.03] * 10)
    _, summary, event, knobs, _, _ = _final_and_best(tmp_path, path, seed)
    check = event["ancestor_checks"][0]
    assert check["kept"] == "node" and all(r == pytest.approx(1.015, rel=0.005) for r in check["ratios"])
    assert summary.best_node == check["node"] and '"y"' in knobs[summary.best_node]


def test_a_parent_far_below_the_best_is_not_measured_again(tmp_path):
    """(B, x) at 2.0x under a steady 3.0x child: no pairing, nothing recorded about one."""
    path, seed = _child_of_steady_parent(tmp_path, [3.0] * 10)
    _, summary, event, _, finals, _ = _final_and_best(tmp_path, path, seed)
    assert "ancestor_checks" not in event and summary.speedup == pytest.approx(3.0, rel=0.02)
    assert sum(finals.values()) <= 2  # the best's own final measurements only

"""The replay target: a landscape stands in for the sandbox, everything else is the real loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arbor.agents.transforms import apply_move
from arbor.agents.transforms.knobs import parse_config
from arbor.campaign.run import run_campaign
from arbor.targets.landscape import load_landscape
from arbor.spec import SpecError, load_spec, parse_spec
from arbor.targets import make_adapter
from arbor.targets.replay import knob_moves
from benchmarks.synthetic import make_landscape


@pytest.fixture
def landscape(tmp_path) -> Path:
    path = tmp_path / "synthetic.json"
    make_landscape().dump(path)
    return path


def _spec(tmp_path, landscape, **target):
    data = {"name": "rp", "target": {"kind": "replay", "landscape": landscape.name, **target},
            "budget": {"max_evaluations": 8, "max_wall_s": 300}, "critic": {"min_speedup": 1.02}}
    return parse_spec(data, "rp.yaml", tmp_path)


def test_spec_accepts_replay_targets_and_resolves_the_path(tmp_path, landscape):
    spec = _spec(tmp_path, landscape, seed=7, moves="neighbours")
    assert spec.target.kind == "replay" and spec.target.seed == 7
    assert spec.landscape_path() == landscape.resolve()
    with pytest.raises(SpecError, match="target.moves"):
        _spec(tmp_path, landscape, moves="sideways")
    with pytest.raises(SpecError, match="kernel, serving or replay"):
        parse_spec({"name": "x", "target": {"kind": "nope"}}, "x.yaml", tmp_path)


def test_root_is_the_default_config_and_moves_follow_the_mode(tmp_path, landscape):
    a = make_adapter(_spec(tmp_path, landscape))
    a.validate()
    assert parse_config(a.root_source()) == {"BLOCK": 16, "METHOD": "plain", "UNROLL": 1}
    recorded = a.moves([])
    assert {m.id for m in recorded} >= {"block-up", "method-fused"}
    assert all(m.transform in ("knob_set", "knob_step") for m in recorded)
    ls = load_landscape(landscape)
    neighbours = {m.id for m in knob_moves(ls, "neighbours")}
    assert {"BLOCK:up", "BLOCK:down", "METHOD:fused", "UNROLL:up"} <= neighbours
    every = {m.id for m in knob_moves(ls, "any")}
    assert "BLOCK:512" in every and "UNROLL:4" in every
    # a recorded const_step move applied to the replay artifact moves the knob one value
    up = next(m for m in recorded if m.id == "block-up")
    assert parse_config(apply_move(a.root_source(), up.transform, up.params))["BLOCK"] == 32


def test_measure_serves_recorded_samples_seeded_per_evaluation(tmp_path, landscape):
    a = make_adapter(_spec(tmp_path, landscape, seed=1))
    src = a.root_source()
    m1, m2 = a.measure(None, src), a.measure(None, src)
    assert m1["status"] == "ok" and len(m1["correctness"]) == len(a.spec.measurement.seeds) >= 3
    assert all(c["ok"] for c in m1["correctness"])
    assert m1["baseline_samples"] != m2["baseline_samples"]  # a fresh draw per evaluation
    again = make_adapter(_spec(tmp_path, landscape, seed=1))
    assert again.measure(None, src) == m1  # same seed, same sequence
    off = a.measure(None, json.dumps({"BLOCK": 17, "METHOD": "plain", "UNROLL": 1}))
    assert off["status"] == "error" and "not a point" in off["error_text"]
    broken = a.measure(None, json.dumps({"BLOCK": 512, "METHOD": "inplace", "UNROLL": 4}))
    assert broken["status"] == "error" and broken["error_class"] == "incorrect"
    assert a.static_check(None, "not json") is not None and a.static_check(None, src) is None


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """One replayed campaign, shared by the tests that inspect it."""
    tmp = tmp_path_factory.mktemp("replayed")
    path = tmp / "synthetic.json"
    make_landscape().dump(path)
    spec = _spec(tmp, path)
    return spec, run_campaign(spec, lambda *a: None), path


def test_a_replayed_campaign_runs_the_real_loop(replayed):
    spec, summary, landscape = replayed
    assert summary.status == "finished" and summary.counts.get("accepted", 0) >= 2
    assert summary.speedup and summary.speedup > 1.3
    best = Path(summary.best_path).read_text()
    ls = load_landscape(landscape)
    assert ls.true_speedup(parse_config(best)) > 1.3  # the belief is a real, good point
    # the Critic ran: the baseline's A/A and at least one confirmation of a new best
    assert summary.measurements > summary.counts.get("accepted", 0) + summary.counts.get("rejected", 0)


def test_cli_reports_a_missing_landscape_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from arbor.cli import app

    (tmp_path / "c.yaml").write_text("name: c\ntarget: {kind: replay, landscape: nowhere.json}\n")
    r = CliRunner().invoke(app, ["run", str(tmp_path / "c.yaml"), "-q"])
    assert r.exit_code == 2, r.output
    assert "landscape not found" in r.output and "Traceback" not in r.output


def test_load_spec_from_yaml(tmp_path, landscape):
    p = tmp_path / "c.yaml"
    p.write_text(f"name: c\ntarget:\n  kind: replay\n  landscape: {landscape.name}\n")
    assert load_spec(p).landscape_path() == landscape.resolve()


def test_the_tree_index_knows_every_artifact_after_a_refresh(replayed):
    from arbor.search_tree.index import TreeIndex
    from arbor.search_tree import open_store
    from arbor.search_tree.store import artifact_sha

    spec, _, _ = replayed
    store = open_store(spec.store_url())
    try:
        camp = store.get_campaign("rp")
        idx = TreeIndex(camp.id)
        idx.refresh(store)
        for n in store.nodes(camp.id):
            assert idx.has_artifact(n.artifact_sha)
        assert not idx.has_artifact(artifact_sha("never proposed"))
    finally:
        store.close()

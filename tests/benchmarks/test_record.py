"""``arbor record``: the knob space a campaign's skills declare, measured through the real harness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arbor.agents.skills import MoveSpec
from arbor.targets.sweep import RecordError, knob_space, point_source
from arbor.agents.transforms.template import knob_values

SRC = 'import torch\nBLOCK = 32\nMODE = "a"\nOTHER = 1\n\n\nclass ModelNew:\n    pass\n'


def _move(id, transform, **params):
    return MoveSpec(id=id, transform=transform, params=params, prior=0.5, family="f")


def test_knob_space_comes_from_the_template_moves_that_apply():
    moves = [_move("up", "const_step", name="BLOCK", values=[16, 32, 64], step=1),
             _move("m-b", "const_set", name="MODE", value="b"),
             _move("n-2", "const_set", name="OTHER", value=4), _move("n-1", "const_set", name="OTHER", value=2),
             _move("gone", "const_set", name="MISSING", value=1),  # not a constant of this source
             _move("compile", "wrap_compile")]
    space = knob_space(SRC, moves, "p.py")
    knobs = {k.name: (k.values, k.default) for k in space.knobs}
    assert knobs == {"BLOCK": ([16, 32, 64], 32), "MODE": (["b", "a"], "a"), "OTHER": ([1, 2, 4], 1)}
    assert {m.id for m in space.moves} == {"up", "m-b", "n-2", "n-1"}
    src = point_source(SRC, {"BLOCK": 64, "MODE": "b", "OTHER": 1})
    assert knob_values(src) == {"BLOCK": 64, "MODE": "b", "OTHER": 1}


def test_a_problem_without_template_moves_cannot_be_recorded():
    with pytest.raises(RecordError, match="no skill move sets a module-level constant"):
        knob_space(SRC, [_move("compile", "wrap_compile")], "p.py")


@pytest.mark.slow
def test_record_measures_points_through_the_harness(campaign_dir: Path, tmp_path: Path):
    """One point of the softmax template, one run each, at a small size: real sandbox runs."""
    from typer.testing import CliRunner

    from arbor.cli import app

    spec = campaign_dir / "landscape_chunked_softmax.yaml"
    text = spec.read_text().replace("  num_threads: 1\n", "  num_threads: 1\n  sizes: {batch_size: 64, dim: 256}\n")
    text = text.replace("time_budget_s: 4.0", "time_budget_s: 0.1").replace("warmup_s: 0.1", "warmup_s: 0.02")
    text = text.replace("min_sample_s: 0.02", "min_sample_s: 0.002")
    spec.write_text(text)
    out = tmp_path / "ls.json"
    r = CliRunner().invoke(app, ["record", str(spec), "-o", str(out), "--repeats", "1", "--limit", "1", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["format"] == "arbor-landscape/1" and data["recorded"]["complete"]
    assert [k["name"] for k in data["knobs"]] == ["CHUNK_ROWS", "METHOD", "OUT"]
    assert len(data["points"]) == 1
    for p in data["points"]:
        assert p["status"] == "ok", p
        assert len(p["runs"]) == 1 and len(p["runs"][0]["b"]) == len(p["runs"][0]["c"]) >= 10
    assert {m["id"] for m in data["moves"]} >= {"sm-method-fused", "sm-chunk-down"}

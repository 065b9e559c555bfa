"""Knob moves of parametric kernels (const_set/const_step) and of configs (knob_step)."""

from __future__ import annotations

import pytest

from arbor.agents.skills import SkillError, parse_skill
from arbor.agents.transforms import apply_move
from arbor.agents.transforms.template import knob_values

SRC = 'import torch\nBLOCK = 64\nMETHOD = "fused"\nSCALE = -0.5\n\n\nclass ModelNew:\n    pass\n'


def test_const_set_rewrites_only_the_named_literal():
    out = apply_move(SRC, "const_set", {"name": "BLOCK", "value": 128})
    assert knob_values(out) == {"BLOCK": 128, "METHOD": "fused", "SCALE": -0.5}
    assert apply_move(SRC, "const_set", {"name": "BLOCK", "value": 64}) is None  # already there
    assert apply_move(SRC, "const_set", {"name": "MISSING", "value": 1}) is None
    assert apply_move(SRC, "const_set", {"name": "torch", "value": 1}) is None  # an import is no knob


def test_const_set_is_canonical_so_paths_meet():
    a = apply_move(apply_move(SRC, "const_set", {"name": "BLOCK", "value": 32}), "const_set",
                   {"name": "METHOD", "value": "manual"})
    b = apply_move(apply_move(SRC, "const_set", {"name": "METHOD", "value": "manual"}), "const_set",
                   {"name": "BLOCK", "value": 32})
    assert a == b


def test_const_step_walks_the_declared_order_and_stops_at_the_ends():
    values = [16, 32, 64, 128]
    up = apply_move(SRC, "const_step", {"name": "BLOCK", "values": values, "step": 1})
    assert knob_values(up)["BLOCK"] == 128
    assert apply_move(up, "const_step", {"name": "BLOCK", "values": values, "step": 1}) is None
    down2 = apply_move(SRC, "const_step", {"name": "BLOCK", "values": values, "step": -2})
    assert knob_values(down2)["BLOCK"] == 16
    assert apply_move(SRC, "const_step", {"name": "BLOCK", "values": [1, 2], "step": 1}) is None  # 64 not listed


def test_a_knob_assigned_twice_is_not_a_knob():
    src = "A = 1\nA = 2\n"
    assert apply_move(src, "const_set", {"name": "A", "value": 3}) is None
    assert knob_values(src) == {}


def test_knob_step_moves_a_json_config():
    cfg = '{\n  "B": 2,\n  "M": "x"\n}\n'
    out = apply_move(cfg, "knob_step", {"knob": "B", "values": [1, 2, 4], "step": -1})
    assert '"B": 1' in out
    assert apply_move(cfg, "knob_step", {"knob": "Z", "values": [1, 2], "step": 1}) is None


@pytest.mark.parametrize("params, problem", [
    ("{name: B}", "value must be"),
    ("{name: 1bad, value: 2}", "name must be"),
    ("{name: B, values: [1], step: 1}", "at least two"),
    ("{name: B, values: [1, 1], step: 1}", "must not repeat"),
    ("{name: B, values: [1, 2], step: 0}", "non-zero"),
])
def test_bad_params_fail_when_the_skill_loads(params, problem):
    transform = "const_step" if "values" in params else "const_set"
    text = f"---\nname: t\nkind: hard\ndomain: kernel\nmoves:\n  - id: m\n    transform: {transform}\n" \
           f"    params: {params}\n    prior: 0.5\n---\nbody\n"
    with pytest.raises(SkillError, match=problem):
        parse_skill(text, "t.md")

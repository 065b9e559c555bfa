"""Skills: shipped files load and their moves work; broken files fail with one actionable line."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

from arbor.agents.skills import SkillError, SkillSpec, kernel_moves, load_skills, parse_skill
from arbor.agents.transforms import apply_move

SHIPPED = {
    "hard": {"fused-activations", "torch-compile", "cpu-threads-vectorization", "memory-format",
             "triton-tiling", "cuda-memory", "cuda-graphs", "quantization-kv-cache"},
    "soft": {"one-change-per-hypothesis", "confirm-new-best", "critic-veto-escalation",
             "reprofile-after-accept", "budget-pacing", "stop-conditions"},
}


def skill_text(name: str, moves: str = "", kind: str = "hard", devices: str = "[cpu, cuda]") -> str:
    return (f"---\nname: {name}\nkind: {kind}\ndomain: kernel\napplies_to: {{devices: {devices}}}\n"
            f"{moves}---\n# {name}\n\nBody text.\n")


def one_move(move_id: str, transform: str = "inference_mode", prior: float = 0.5) -> str:
    return f"moves:\n  - id: {move_id}\n    transform: {transform}\n    prior: {prior}\n"


def assert_one_line(err: pytest.ExceptionInfo, *needles: str) -> None:
    message = str(err.value)
    assert "\n" not in message and " — " in message, message
    for needle in needles:
        assert needle in message, message


def test_all_shipped_skills_load_with_real_bodies() -> None:
    skills = load_skills()
    by_kind = {k: {s.name for s in skills if s.kind == k} for k in ("hard", "soft")}
    assert all(SHIPPED[k] <= by_kind[k] for k in SHIPPED), by_kind  # other skills may ship too
    assert [(s.kind, s.name) for s in skills] == sorted((s.kind, s.name) for s in skills)
    for skill in skills:
        assert 20 <= len(skill.body.splitlines()) <= 60, skill.name
        assert skill.summary and not skill.body.startswith("---")
        assert all(m.family for m in skill.moves)
        if skill.kind == "soft":
            assert skill.domain == "any" and not skill.moves
    ids = [m.id for s in skills for m in s.moves]
    assert len(ids) == len(set(ids))


def test_shipped_families_are_correlated_arms() -> None:
    """A family shares one posterior (agents/priors.py): its members must answer alike. So the
    compile variants are one family, thread counts another, and no family pushes one knob both up
    and down (an interior optimum makes those answer opposite ways)."""
    moves = {m.id: m for s in load_skills() for m in s.moves}
    compile_ids = {"compile-default", "compile-max-autotune", "compile-epilogue-fusion",
                   "compile-coordinate-descent", "compile-freezing"}
    assert {moves[i].family for i in compile_ids} == {"torch-compile"}
    assert moves["threads-1"].family == moves["threads-2"].family == "threads"
    assert moves["inference-mode"].family != moves["threads-1"].family  # one skill, two mechanisms
    assert moves["channels-last"].family == moves["graph-channels-last-conv"].family
    directions: dict[tuple[str, str], set[bool]] = {}
    for m in moves.values():
        if m.transform == "knob_scale":
            directions.setdefault((m.family, m.params["knob"]), set()).add(m.params["factor"] > 1)
    assert directions and all(len(up) == 1 for up in directions.values()), directions


def test_shipped_fused_activation_moves_fire_and_keep_numerics() -> None:
    """Each template, written out as code, is rewritten into something numerically equal."""
    skill = next(s for s in load_skills() if s.name == "fused-activations")
    assert {m.transform for m in skill.moves} == {"rewrite_pattern"}
    for move in skill.moves:
        prior = move.prior
        assert 0.4 <= prior <= 0.8
        body = re.sub(r"\$x", "x", move.params["pattern"]).replace("$d", "-1")
        src = ("import math\nimport torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n"
               f"    def forward(self, x):\n        return {body}\n")
        after = apply_move(src, move.transform, move.params)
        assert after is not None, move.id
        assert ast.dump(ast.parse(after)) != ast.dump(ast.parse(src))
        x = torch.randn(16, 32)
        ns_a: dict = {}
        ns_b: dict = {}
        exec(src, ns_a)
        exec(after, ns_b)
        assert torch.allclose(ns_a["ModelNew"]()(x), ns_b["ModelNew"]()(x), rtol=1e-4, atol=1e-5), move.id


def test_kernel_moves_filters_by_device() -> None:
    skills = load_skills()
    cpu = {m.id for m in kernel_moves(skills, "cpu")}
    cuda = {m.id for m in kernel_moves(skills, "cuda:0")}
    assert {"threads-1", "compile-default", "channels-last", "silu-manual"} <= cpu
    assert "threads-1" not in cuda and {"compile-default", "channels-last-cuda"} <= cuda
    assert "channels-last-cuda" not in cpu and "channels-last" not in cuda  # one conditioned move per device
    only_cuda = parse_skill(skill_text("gpu-only", one_move("gpu-move"), devices="[cuda]"))
    anywhere = parse_skill(skill_text("anywhere", one_move("any-move")).replace("applies_to: {devices: [cpu, cuda]}\n", ""))
    soft = parse_skill(skill_text("protocol", kind="soft"))
    assert [m.id for m in kernel_moves([only_cuda, anywhere, soft], "cpu")] == ["any-move"]
    assert [m.id for m in kernel_moves([only_cuda, anywhere, soft], "cuda")] == ["gpu-move", "any-move"]


def test_bad_front_matter_is_one_line() -> None:
    with pytest.raises(SkillError) as err:
        parse_skill("# no front matter\n", "x.md")
    assert_one_line(err, "x.md", "front matter")
    with pytest.raises(SkillError) as err:
        parse_skill("---\nname: a\nkind: hard\n", "y.md")
    assert_one_line(err, "y.md", "closing")
    with pytest.raises(SkillError) as err:
        parse_skill("---\nname: [unclosed\n---\nbody\n", "z.md")
    assert_one_line(err, "z.md", "YAML")
    with pytest.raises(SkillError) as err:
        parse_skill(skill_text("ok").replace("kind: hard", "kind: medium"), "k.md")
    assert_one_line(err, "k.md", "kind")
    with pytest.raises(SkillError) as err:
        parse_skill(skill_text("ok", one_move("m", prior=1.5)), "p.md")
    assert_one_line(err, "p.md", "moves[0].prior")
    with pytest.raises(SkillError) as err:
        parse_skill(skill_text("ok", one_move("m") + "    colour: red\n"), "e.md")
    assert_one_line(err, "e.md", "colour")


def test_unknown_transform_names_the_move_and_lists_known_ones() -> None:
    with pytest.raises(SkillError) as err:
        parse_skill(skill_text("s", one_move("my-move", transform="wrap_compiel")), "s.md")
    assert_one_line(err, "s.md", "my-move", "wrap_compiel", "wrap_compile", "rewrite_pattern")
    bad_params = one_move("tmpl", transform="rewrite_pattern") + "    params: {pattern: '$x +', replacement: '$x'}\n"
    with pytest.raises(SkillError) as err:
        parse_skill(skill_text("s", bad_params), "t.md")
    assert_one_line(err, "t.md", "tmpl", "params")
    # transforms declared by name (imported on first call) are validated at load time all the same
    bad_passes = one_move("g", transform="graph_rewrite") + "    params: {passes: [size1, nope]}\n"
    with pytest.raises(SkillError) as err:
        parse_skill(skill_text("s", bad_passes), "g.md")
    assert_one_line(err, "g.md", "g", "nope")


def test_soft_skills_cannot_have_moves_and_family_defaults() -> None:
    with pytest.raises(SkillError) as err:
        parse_skill(skill_text("proto", one_move("m"), kind="soft"), "soft.md")
    assert_one_line(err, "soft.md", "moves")
    skill = parse_skill(skill_text("fam", one_move("m1")))
    assert isinstance(skill, SkillSpec) and skill.moves[0].family == "fam"
    assert skill.body.startswith("# fam") and skill.summary == "Body text."


def test_duplicate_move_ids_and_user_overrides(tmp_path: Path) -> None:
    with pytest.raises(SkillError) as err:
        parse_skill(skill_text("d", one_move("m") + one_move("m").replace("moves:\n", "")), "d.md")
    assert_one_line(err, "d.md", "duplicate")

    clash = tmp_path / "clash"
    clash.mkdir()
    (clash / "mine.md").write_text(skill_text("my-skill", one_move("compile-default")))
    with pytest.raises(SkillError) as err:
        load_skills([clash])
    assert_one_line(err, "compile-default", "torch-compile")

    override = tmp_path / "override"
    override.mkdir()
    (override / "tc.md").write_text(skill_text("torch-compile", one_move("my-compile", "wrap_compile", 0.9)))
    skills = {s.name: s for s in load_skills([override])}
    assert [m.id for m in skills["torch-compile"].moves] == ["my-compile"]
    assert skills["torch-compile"].path.endswith("tc.md")

    with pytest.raises(SkillError) as err:
        load_skills([tmp_path / "missing"])
    assert_one_line(err, "missing")


def test_a_campaign_can_leave_skills_and_moves_out_and_a_typo_is_an_error():
    from arbor.agents.skills import SkillError, load_skills

    kept = load_skills(exclude=["torch-compile", "gelu-erf"])
    names = {s.name for s in kept}
    moves = {m.id for s in kept for m in s.moves}
    assert "torch-compile" not in names and "compile-default" not in moves
    assert "fused-activations" in names and "gelu-erf" not in moves and "silu-manual" in moves
    with pytest.raises(SkillError, match=r"skills\.exclude: 'torch-compil' names no skill or move"):
        load_skills(exclude=["torch-compil"])

"""Prompt assembly: token budgets, priorities, truncation, and the compact tree summary."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from arbor.agents.llm.budget import approx_tokens
from arbor.agents.llm.prompts import Section, fit, relevant_skills, skill_sections
from arbor.agents.llm.tree_summary import tree_sections
from arbor.agents.skills import load_skills
from arbor.search_tree.records import NodeRecord, VerdictRecord

T0 = datetime(2025, 1, 1)


def node(i, parent=None, state="accepted", value=None, diagnosis=None, reason=None, move=None):
    return NodeRecord(id=i, campaign_id=1, parent_id=parent, depth=0 if parent is None else 1, state=state,
                      artifact_sha=f"{i:064x}", specialist="t", move_id=move, family=None,
                      hypothesis=f"hypothesis of node {i}", prior=0.5, predicted_gain=None, value=value,
                      speedup=None, diagnosis=diagnosis, reason=reason, step=i, created_at=T0 + timedelta(seconds=i),
                      finished_at=T0 + timedelta(seconds=i, milliseconds=500))


def test_fit_keeps_priorities_truncates_one_and_drops_the_rest():
    secs = [Section("A", "a" * 300, 0, truncatable=False), Section("B", "b" * 3000, 2),
            Section("C", "c" * 3000, 1), Section("D", "d" * 3000, 3)]
    f = fit(secs, 1400)
    assert f.tokens <= 1400
    assert f.included == ["A", "B", "C"] and f.truncated == ["B"] and f.dropped == ["D"]
    assert f.text.index("## A") < f.text.index("## B") < f.text.index("## C")  # authors' order kept
    assert "truncated" in f.text and "c" * 3000 in f.text


def test_fit_never_exceeds_the_budget():
    secs = [Section(f"S{i}", ("word " * (50 * i)), i) for i in range(1, 30)]
    for budget in (200, 500, 1000, 5000, 50_000):
        f = fit(secs, budget)
        assert f.tokens <= budget + 10, (budget, f.tokens)


def test_skills_are_filtered_by_domain_and_device_with_soft_first():
    skills = load_skills()
    cpu = [s.name for s in relevant_skills(skills, "kernel", "cpu")]
    assert "cpu-threads-vectorization" in cpu and "triton-tiling" not in cpu and "cuda-graphs" not in cpu
    assert [s.kind for s in relevant_skills(skills, "kernel", "cpu")][0] == "soft"
    sections = skill_sections(skills, "kernel", "cuda")
    titles = [s.title for s in sections]
    assert titles[0] == "Skills (index)" and "Skill: triton-tiling (hard)" in titles
    soft = max(s.priority for s in sections if "(soft)" in s.title)
    hard = min(s.priority for s in sections if "(hard)" in s.title)
    assert soft < hard  # under a tight budget, protocols survive before domain detail
    only_soft = skill_sections(skills, "any", None, hard=False)
    assert all("(hard)" not in s.title for s in only_soft)


def test_tree_summary_shows_best_path_failures_with_narratives_and_profile():
    nodes = [node(1, value=0.0), node(2, 1, value=0.7, move="fuse"), node(3, 2, value=0.9, move="compile"),
             node(4, 1, value=0.2, move="threads"),
             node(5, 3, state="failed", diagnosis="compile_error", reason="line 3: invalid syntax"),
             node(6, 3, state="rejected", diagnosis="incorrect", reason="wrong on seed 1")]
    verdict = VerdictRecord(1, 6, 1, "reject", "incorrect", "wrong", [{"narrative": "erf GELU used for tanh GELU"}],
                            "critic", T0)
    secs = {s.title: s.text for s in tree_sections(nodes, "gelu on cpu", profile={"top_op": "aten::tanh"},
                                                   verdicts_of=lambda i: [verdict] if i == 6 else [])}
    best = secs["Best path (baseline → current best)"].splitlines()
    assert [line.split()[0] for line in best] == ["#1", "#2", "#3"] and "2.460x" in best[-1]
    assert "#4 [threads]" in secs["Other accepted candidates"]
    fails = secs["Recent failures and rejections (newest first)"]
    assert fails.index("#6") < fails.index("#5") and "compile_error: line 3" in fails
    assert "root cause (Critic): erf GELU used for tanh GELU" in fails
    assert "aten::tanh" in secs["Current bottleneck profile"]
    assert secs["Target"] == "gelu on cpu"


def test_tree_summary_stays_compact_for_a_large_tree():
    nodes = [node(1, value=0.0)] + [node(i, 1, value=i / 1000) for i in range(2, 2000)] + \
            [replace(node(i, 1, state="failed", diagnosis="runtime_error", reason="x" * 500)) for i in range(2000, 2500)]
    text = fit(tree_sections(nodes, "t"), 2000).text
    assert approx_tokens(text) <= 2000 and text.count("\n#") < 30

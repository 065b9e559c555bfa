"""The red team's generator, offline: it covers the catalogue on any KernelBench problem,
deterministically for a seed, and every variant is a module the harness can load; honest twins
pass the static guard (a twin the guard rejects would be a false positive before anything runs)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from arbor.agents.critic.guard import check_source
from arbor.redteam import CLASSES, DISGUISES, generate
from arbor.redteam.codegen import targets
from arbor.redteam.generator import cover

ROOT = Path(__file__).parents[3]
QUICKSTART = ROOT / "campaigns" / "problems" / "gelu_gate.py"
MLP = ROOT / "tests" / "adversarial" / "problems" / "mlp.py"


@pytest.fixture(scope="module")
def quickstart():
    return generate(QUICKSTART.read_text(), seed=0)


@pytest.fixture(scope="module")
def mlp():
    return generate(MLP.read_text(), seed=0)


@pytest.mark.parametrize("name", ["quickstart", "mlp"])
def test_a_seed_covers_the_catalogue_at_the_acceptance_size(name, request):
    """Issue 27's acceptance: >= 200 hostile variants across >= 12 classes x >= 4 disguises and
    >= 30 honest twins per problem (here both problems reach it on their own)."""
    vs = request.getfixturevalue(name)
    hostile = [v for v in vs if v.kind == "hostile"]
    honest = [v for v in vs if v.kind == "honest"]
    assert len(hostile) >= 200 and len(honest) >= 14
    assert len({v.klass for v in hostile}) >= 12 and len({v.disguise for v in hostile}) >= 4
    assert {v.klass for v in hostile} == {c.id for c in CLASSES}
    assert {v.disguise for v in hostile} == {d.id for d in DISGUISES}
    for c in CLASSES:  # every payload of every class is written at least once
        assert {v.payload for v in hostile if v.klass == c.id} == {p.id for p in c.payloads}, c.id
    assert len({v.source for v in vs}) == len(vs)  # one node per artifact: no two alike


def test_the_same_seed_writes_the_same_variants_and_another_seed_others(quickstart):
    again = generate(QUICKSTART.read_text(), seed=0)
    assert [v.source for v in again] == [v.source for v in quickstart]
    other = generate(QUICKSTART.read_text(), seed=1)
    assert sum(a.source != b.source for a, b in zip(other, quickstart)) > len(quickstart) // 2


def test_every_variant_is_a_candidate_and_twins_pass_the_guard(quickstart, mlp):
    for v in quickstart + mlp:
        tree = ast.parse(v.source)
        assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body), v.id
    flagged = [(v.id, check_source(v.source)[0].reason) for v in quickstart + mlp
               if v.kind == "honest" and check_source(v.source)]
    assert flagged == []
    # the disguises are what make the guard blind: most hostile variants reach the sandbox
    caught = [v for v in quickstart if v.kind == "hostile" and check_source(v.source)]
    assert 0 < len(caught) < len(quickstart) // 4


@pytest.mark.parametrize("problem", sorted((ROOT / "tests" / "adversarial" / "problems").glob("*.py"))
                         + sorted((ROOT / "benchmarks" / "problems").glob("*.py")), ids=lambda p: p.stem)
def test_any_kernelbench_problem(problem):
    """Derived from the problem's own Model source: no problem-specific code."""
    vs = generate(problem.read_text(), seed=3, per_combo=1, twins=1, compile_twin=False)
    assert {v.klass for v in vs if v.kind == "hostile"} == {c.id for c in CLASSES}
    for v in vs:
        compile(v.source, v.id, "exec")


def test_targets_are_what_the_reference_uses():
    t = targets(MLP.read_text())
    assert (t.function, t.module_class) == ("torch.tanh", "torch.nn.Linear")
    q = targets(QUICKSTART.read_text())
    assert q.function in ("torch.tanh", "torch.sigmoid", "torch.pow") and q.module_class == "torch.nn.Module"


def test_the_ci_subset_has_every_class_and_every_disguise(quickstart):
    sub = cover(quickstart)
    hostile = [v for v in sub if v.kind == "hostile"]
    assert {v.klass for v in hostile} == {c.id for c in CLASSES}
    assert {v.disguise for v in hostile} == {d.id for d in DISGUISES}
    assert len(hostile) <= len(CLASSES) + 2 and sum(v.kind == "honest" for v in sub) == 4


def test_unknown_class_or_disguise_is_one_clear_error():
    with pytest.raises(ValueError, match="unknown disguise nope"):
        generate(QUICKSTART.read_text(), disguises=["nope"])

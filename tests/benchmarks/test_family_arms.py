"""Family posteriors through the real loop (heuristic orchestrator, specialist, Critic, store) on
replayed archetypes of the development set, before and after (benchmarks/family_arms.py)."""

from __future__ import annotations

from pathlib import Path

from arbor.search_tree import open_store
from benchmarks import family_arms as F


def _landscape(tmp_path: Path, name: str) -> str:
    arch = next(a for a in F.ARCHETYPES if a.name == name)
    path = tmp_path / f"{name}.json"
    F.build_landscape(arch).dump(path)
    return str(path)


def test_softmax_stops_measuring_compile_variants_after_the_first_regresses(tmp_path):
    path = _landscape(tmp_path, "softmax")
    before = F._run(("softmax", path, "before", [0]))[0]
    after = F._run(("softmax", path, "after", [0]))[0]
    assert before["regressed"] == after["regressed"] == ["torch-compile"]
    assert before["after"] >= 3  # the fixed factors measured the other variants anyway
    assert after["after"] == 0 and after["evaluations"] < before["evaluations"]
    assert after["stop"].startswith("exhausted") and "ruled out by what their family measured" in after["stop"]
    assert "compile-freezing" in after["stop"] and after["final_true"] == before["final_true"]


def test_a_sibling_that_wins_is_still_found(tmp_path):
    """Linear: compile-default regresses 0.88x, compile-freezing wins 1.25x and nothing else helps."""
    path = _landscape(tmp_path, "linear_freezing")
    after = F._run(("linear_freezing", path, "after", [0]))[0]
    assert after["final_true"] >= 1.2


def test_the_count_reads_any_store(tmp_path):
    """``--stores``: the same count on a finished campaign's store (here a replayed one)."""
    from arbor.campaign.run import run_campaign
    from arbor.targets.landscape import load_landscape
    from benchmarks.searchers import replay_spec

    path = Path(_landscape(tmp_path, "softmax"))
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        spec = replay_spec(path, load_landscape(path), "sm", "puct", 0, tmp_path)
        run_campaign(spec, lambda kind, data: None, store=store)
        spend = F.family_spend(store, store.get_campaign("sm").id)
    finally:
        store.close()
    assert spend["regressed"] == ["torch-compile"] and spend["after"] == 0
    assert F.main(["--stores", str(tmp_path / "s.db")]) == 0

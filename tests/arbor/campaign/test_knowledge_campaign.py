"""Knowledge across campaigns, on a replayed landscape (seconds): records of every judged
candidate, a warm start that reaches the first campaign's best sooner, quarantine of revoked
records, and the calibration table in the CLI and the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arbor.campaign.run import run_campaign
from arbor.cli import app
from arbor.search_tree import open_store
from arbor.search_tree.knowledge import KnowledgeStore
from arbor.spec import parse_spec
from benchmarks.synthetic import make_landscape


def _spec(tmp: Path, name: str, knowledge: bool = True, evaluations: int = 12):
    data = {"name": name, "target": {"kind": "replay", "landscape": "synthetic.json"},
            "budget": {"max_evaluations": evaluations, "max_wall_s": 300}, "critic": {"min_speedup": 1.02},
            "store": {"url": f"sqlite:///{tmp}/{name}.db"}}
    if knowledge:
        data["knowledge"] = {"url": f"sqlite:///{tmp}/knowledge.db"}
    return parse_spec(data, f"{name}.yaml", tmp)


def _evaluations_to(spec, target: float) -> tuple[int | None, list]:
    """Evaluations (candidates in creation order) until the best reached ``target``."""
    store = open_store(spec.store_url())
    try:
        camp = store.get_campaign(spec.name)
        nodes = sorted((n for n in store.nodes(camp.id) if n.parent_id is not None), key=lambda n: n.id)
        best = 1.0
        for i, n in enumerate(nodes, 1):
            if n.state == "accepted" and n.speedup:
                best = max(best, n.speedup)
            if best >= target - 1e-9:
                return i, nodes
        return None, nodes
    finally:
        store.close()


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("knowledge")
    make_landscape().dump(tmp / "synthetic.json")
    first, second = _spec(tmp, "first"), _spec(tmp, "second")
    s1 = run_campaign(first, lambda *a: None)
    s2 = run_campaign(second, lambda *a: None)
    return tmp, first, second, s1, s2


def test_every_judged_candidate_becomes_a_record(two):
    tmp, first, _, _, _ = two
    store = open_store(first.store_url())
    camp = store.get_campaign("first")
    judged = [n for n in store.nodes(camp.id) if n.parent_id is not None and n.state in ("accepted", "rejected", "failed")]
    events = store.events(camp.id, limit=10_000, kinds=["knowledge"])
    store.close()
    assert len(events) == len(judged) > 0
    r = events[0].payload
    assert r["hardware"]["class"] and r["signature"]["source"] == "landscape" and r["move_id"]
    assert {"diagnosis", "speedup", "p_accept", "predicted_gain", "family", "software"} <= set(r)
    ks = KnowledgeStore(f"sqlite:///{tmp}/knowledge.db")
    assert len([x for x in ks.records() if x.campaign == "first"]) == len(judged)
    ks.close()


def test_the_verified_final_best_is_marked_in_the_knowledge_store(two):
    """What recipes and briefs transfer is each campaign's final, not its highest reading."""
    tmp, first, second, s1, s2 = two
    ks = KnowledgeStore(f"sqlite:///{tmp}/knowledge.db")
    for spec, summary in ((first, s1), (second, s2)):
        marked = [r for r in ks.records() if r.campaign == spec.name and "verified_final" in r.extra]
        store = open_store(spec.store_url())
        sha = store.get_node(summary.best_node).artifact_sha
        store.close()
        assert [(r.artifact_sha, r.extra["verified_final"]) for r in marked] == [(sha, summary.speedup)]
    ks.close()
    # running the finished campaign again marks nothing twice
    again = run_campaign(_spec(tmp, "first"), lambda *a: None)
    store = open_store(first.store_url())
    assert len(store.events(store.get_campaign("first").id, kinds=["knowledge_final"])) == 1
    store.close()
    assert again.best_node == s1.best_node


def test_second_campaign_starts_warm_and_reaches_the_first_best_sooner(two):
    tmp, first, second, s1, _ = two
    target = max(n.speedup or 0 for n in _evaluations_to(first, 99)[1] if n.state == "accepted")
    cold, _ = _evaluations_to(first, target)
    warm, nodes = _evaluations_to(second, target)
    assert warm is not None and cold is not None and warm < cold
    store = open_store(second.store_url())
    camp = store.get_campaign("second")
    ws = store.events(camp.id, limit=10, kinds=["warm_start"])
    store.close()
    assert ws and ws[-1].payload["priors"]
    # `show` says where a node's prior came from
    r = CliRunner().invoke(app, ["show", str(nodes[0].id), f"sqlite:///{tmp}/second.db", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["prior_from"]["source"] == "knowledge"
    r = CliRunner().invoke(app, ["show", str(nodes[0].id), f"sqlite:///{tmp}/second.db"])
    assert "from knowledge" in r.output


def test_report_and_calibration_show_knowledge_priors_and_brier_scores(two, tmp_path):
    tmp, *_ = two
    r = CliRunner().invoke(app, ["calibration", f"sqlite:///{tmp}/first.db"])
    assert r.exit_code == 0, r.output
    assert "Brier" in r.output
    r = CliRunner().invoke(app, ["calibration", f"sqlite:///{tmp}/first.db", "--json"])
    agents = json.loads(r.output)["agents"]
    assert 0 <= agents["kernel-heuristic"]["brier"] <= 1 and agents["kernel-heuristic"]["n"] > 0
    r = CliRunner().invoke(app, ["report", f"sqlite:///{tmp}/second.db", "-o", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Warm start" in md and "came from the knowledge store" in md and "## Calibration" in md
    store = open_store(f"sqlite:///{tmp}/first.db")
    cal = store.events(store.get_campaign("first").id, limit=10, kinds=["calibration"])
    store.close()
    assert cal and cal[-1].payload["agents"]["kernel-heuristic"]["brier"] is not None


def test_revoked_records_never_raise_a_prior(two, tmp_path):
    tmp, *_ = two
    ks = KnowledgeStore(f"sqlite:///{tmp_path}/k.db")
    src = KnowledgeStore(f"sqlite:///{tmp}/knowledge.db")
    recs = [r for r in src.records() if r.campaign == "first"]
    src.close()
    ks.add(recs)
    for r in recs:  # every candidate of the first campaign later found incorrect
        ks.revoke(r.artifact_sha, "incorrect on re-check")
    ks.close()
    make_landscape().dump(tmp_path / "synthetic.json")
    spec = _spec(tmp_path, "third", evaluations=3)
    spec.knowledge.url = f"sqlite:///{tmp_path}/k.db"
    run_campaign(spec, lambda *a: None)
    store = open_store(spec.store_url())
    ws = store.events(store.get_campaign("third").id, limit=10, kinds=["warm_start"])[-1].payload
    store.close()
    assert ws["priors"]
    for p in ws["priors"].values():
        assert p["wins"] == 0 and p["prior"] < p["base"]
    assert all(row["prior"] < 0.5 for row in ws["by_path"])


def test_knowledge_cli_ls_export_import(two, tmp_path):
    tmp, *_ = two
    url = f"sqlite:///{tmp}/knowledge.db"
    r = CliRunner().invoke(app, ["knowledge", "ls", "--url", url, "--json"])
    assert r.exit_code == 0 and len(json.loads(r.output)) > 0
    r = CliRunner().invoke(app, ["knowledge", "export", str(tmp_path / "k.jsonl"), "--url", url])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["knowledge", "import", str(tmp_path / "k.jsonl"), "--url", f"sqlite:///{tmp_path}/n.db"])
    assert r.exit_code == 0 and "new records imported" in r.output
    (tmp_path / "junk.jsonl").write_text("not json\n")
    r = CliRunner().invoke(app, ["knowledge", "import", str(tmp_path / "junk.jsonl"), "--url", f"sqlite:///{tmp_path}/n.db"])
    assert r.exit_code == 2 and "junk.jsonl:1" in r.output and "Traceback" not in r.output

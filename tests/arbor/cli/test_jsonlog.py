"""``arbor run --json-log`` and the run's progress bar."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

from rich.console import Console

from arbor.cli.terminal import Reporter
from arbor.search_tree import open_store
from tests.arbor.dashboard.shared_campaign import shared_campaign


def test_json_log_has_one_event_per_line_matching_the_store():
    shared = shared_campaign()
    lines = shared.json_log.read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert events[0]["event"] == "run_started" and events[-1]["event"] == "run_finished"
    assert all({"ts", "t", "event", "campaign"} <= e.keys() for e in events)
    store = open_store(f"sqlite:///{shared.db}", read_only=True)
    camp = store.get_campaign("dash")
    verdicts = store.verdicts_after(camp.id, 0)
    logged = [e for e in events if e["event"] == "verdict"]
    assert [(e["node"], e["decision"], e["diagnosis"]) for e in logged] == \
        [(v.node_id, v.decision, v.diagnosis) for v in verdicts]
    measured = [e for e in events if e["event"] == "measuring"]
    assert len(measured) == sum(len(store.measurements(n.id)) for n in store.nodes(camp.id))
    assert events[-1]["stop_reason"] == camp.stop_reason
    store.close()
    # the terminal output kept its line per verdict
    assert shared.run.stdout.count("measuring node") == len(measured)


def _node(i, parent=1):
    return SimpleNamespace(id=i, parent_id=parent, move_id=f"m{i}", speedup=1.5, state="queued")


def test_progress_bar_counts_evaluations_and_keeps_verdict_lines():
    console = Console(record=True, force_terminal=True, width=120, file=io.StringIO())
    j = SimpleNamespace(decision="reject", diagnosis="no_gain", reason="not significant")
    with Reporter(console, total=3, done=1) as rep:
        assert rep.progress is not None
        rep("measuring", {"node": _node(2), "attempt": 1, "purpose": "primary"})
        rep("verdict", {"node": _node(2), "judgement": SimpleNamespace(**{**j.__dict__, "decision": "remeasure"})})
        rep("measuring", {"node": _node(2), "attempt": 2, "purpose": "remeasure"})
        rep("verdict", {"node": _node(2), "judgement": j})
        rep("new_best", {"node": _node(2)})
        task = rep.progress.tasks[0]
        assert task.completed == 2 and task.total == 3  # one resumed + one new; a remeasure is not an evaluation
    text = console.export_text()
    assert "measuring node 2" in text and "no_gain" in text and "new best" in text


def test_no_progress_bar_when_quiet_or_not_a_terminal():
    assert Reporter(Console(file=io.StringIO(), force_terminal=True), quiet=True, total=3).progress is None
    assert Reporter(Console(file=io.StringIO(), force_terminal=False), total=3).progress is None


def test_a_resumed_run_starts_its_bar_at_the_evaluations_already_done(tmp_path):
    from arbor.campaign.source import evaluations_done

    shared = shared_campaign()
    store = open_store(f"sqlite:///{shared.db}", read_only=True)
    done = store.measurement_count(store.get_campaign("dash").id, distinct_candidates=True)
    store.close()
    assert evaluations_done(f"sqlite:///{shared.db}", "dash") == done > 0
    assert evaluations_done(f"sqlite:///{shared.db}", "other") == 0
    assert evaluations_done(f"sqlite:///{tmp_path / 'none.db'}", "dash") == 0
    assert not (tmp_path / "none.db").exists()

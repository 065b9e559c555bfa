"""The dashboard's feed: read-only, waiting before a campaign exists, and incremental."""

from __future__ import annotations

import io
import sqlite3
from datetime import timedelta

import pytest
from rich.console import Console

from arbor.campaign.source import resolve_source
from arbor.dashboard import CampaignFeed, render_frame
from arbor.dashboard.charts import column_chart, fit, sparkline
from arbor.search_tree import open_store
from arbor.search_tree.store import StoreError


def _text(feed: CampaignFeed, width: int = 140, height: int = 40) -> str:
    console = Console(record=True, width=width, height=height, file=io.StringIO())
    render_frame(feed, console, width=width, height=height)
    return console.export_text()


def _writer(db):
    store = open_store(f"sqlite:///{db}")
    camp = store.get_or_create_campaign("c1", "kernel", {"budget": {"max_evaluations": 50, "max_wall_s": 600}})
    root_sha = store.put_artifact("root", "kernel_source")
    root = store.add_node(camp.id, root_sha, "baseline")
    store.update_campaign(camp.id, root_node_id=root.id)
    return store, camp, root


def _child(store, camp, parent, i, state="queued"):
    sha = store.put_artifact(f"candidate {i}", "kernel_source")
    n = store.add_node(camp.id, sha, "spec", parent_id=parent.id, move_id=f"move-{i}")
    if state != "proposed":
        n = store.transition(n.id, "queued")
    return n


def test_waits_for_a_store_that_does_not_exist_and_never_creates_it(tmp_path):
    db = tmp_path / "arbor.db"
    feed = CampaignFeed(resolve_source(str(db)))
    assert feed.poll() is False
    assert "no store yet" in feed.state.waiting
    assert "Waiting for the campaign to start" in _text(feed)
    assert not db.exists()


def test_waits_while_the_store_is_empty_and_never_migrates_it(tmp_path):
    db = tmp_path / "arbor.db"
    sqlite3.connect(db).close()  # the writer created the file but has not migrated yet
    feed = CampaignFeed(resolve_source(str(db)))
    assert feed.poll() is False
    assert "being created" in feed.state.waiting
    tables = sqlite3.connect(db).execute("select name from sqlite_master").fetchall()
    assert tables == []  # the dashboard did not run the migrations


def test_waits_for_the_named_campaign_then_attaches(tmp_path):
    db = tmp_path / "arbor.db"
    writer = open_store(f"sqlite:///{db}")
    feed = CampaignFeed(resolve_source(str(db), "c1"))
    assert feed.poll() is False and "has not started yet" in feed.state.waiting
    writer.get_or_create_campaign("c1", "kernel", {})
    feed.poll()
    assert feed.state.waiting is None and feed.state.campaign.name == "c1"


def test_several_campaigns_without_a_name_is_a_user_error(tmp_path):
    db = tmp_path / "arbor.db"
    writer = open_store(f"sqlite:///{db}")
    writer.get_or_create_campaign("a", "kernel", {})
    writer.get_or_create_campaign("b", "kernel", {})
    with pytest.raises(StoreError, match="--campaign NAME"):
        CampaignFeed(resolve_source(str(db))).poll()


def test_the_feed_cannot_write(tmp_path):
    db = tmp_path / "arbor.db"
    store, camp, _ = _writer(db)
    feed = CampaignFeed(resolve_source(str(db)))
    feed.poll()
    with pytest.raises(Exception, match="readonly|read-only|query_only"):
        feed.store.append_event(camp.id, "sneaky")
    assert [e.kind for e in store.events(camp.id)] == []


def test_polls_read_only_what_changed(tmp_path):
    db = tmp_path / "arbor.db"
    store, camp, root = _writer(db)
    kids = [_child(store, camp, root, i) for i in range(300)]
    feed = CampaignFeed(resolve_source(str(db)), overlap=timedelta(0))
    feed.poll()
    assert len(feed.state.nodes) == 301 and feed.state.counts["queued"] == 300
    feed.poll()
    assert feed.state.poll.changed == 0 and feed.state.poll.rows <= 2  # campaign row + cursor node

    # the writer keeps going while the feed is attached (WAL: it is never blocked)
    store.start_running(kids[5].id, "w")
    store.record_measurement(kids[5].id, 1, "primary", {"status": "ok", "baseline_samples": [1.0] * 5,
                                                         "candidate_samples": [0.5] * 5,
                                                         "fingerprint": {
        "device": "cuda:0", "gpu_name": "H100", "clock_mode": "lock", "clocks_locked": True,
        "gpu_state_start": {"sm_clock_mhz": 1980, "temperature_c": 35, "throttle_reasons": 0},
        "gpu_state_end": {"sm_clock_mhz": 1410, "mem_clock_mhz": 1593, "temperature_c": 41,
                          "throttle_reasons": 0x20}}}, "local")
    store.record_verdict(kids[5].id, 1, "accept", "improved", "2x", [{"stats": {"speedup": 2.0}}],
                         final_state="accepted", value=0.69, speedup=2.0)
    store.append_event(camp.id, "propose", {"move": "x"}, agent="llm", prompt_tokens=100,
                       completion_tokens=20, cost_usd=0.01)
    assert feed.poll() is True
    p = feed.state.poll
    assert p.rows <= 8, p  # campaign + 1 node (+ cursor) + 1 measurement + 1 verdict + 2 events
    st = feed.state
    assert st.nodes[kids[5].id].state == "accepted" and st.best.id == kids[5].id
    assert st.evaluations == 1 and st.tokens == 120 and st.cost_usd == pytest.approx(0.01)
    assert [n.id for n in st.best_path()] == [root.id, kids[5].id]
    text = _text(feed, 160, 50)
    # the reading taken after timing wins over the one before it
    assert "locked sm 1410 MHz mem 1593 MHz (mode lock)" in text and "41 °C" in text and "H100" in text
    assert "SwThermal (0x20)" in text
    assert "2.000x" in text and "move-5" in text and "120 tokens" in text
    assert "1 / 50" in text  # the budget comes from the campaign's stored spec


def test_tree_panel_elides_what_does_not_fit(tmp_path):
    db = tmp_path / "arbor.db"
    store, camp, root = _writer(db)
    for i in range(60):
        _child(store, camp, root, i)
    feed = CampaignFeed(resolve_source(str(db)))
    text = _text(feed, 160, 30)
    assert "more (" in text  # "… N more (k queued)" instead of overflowing the panel
    assert len(text.rstrip("\n").split("\n")) == 30


def test_charts():
    assert fit([1, 2, 3], 6) == [1, 1, 2, 2, 3, 3]
    assert fit(list(range(100)), 10)[-1] == 99
    s = sparkline([1.0, 2.0, 3.0], 9)
    assert len(s) == 9 and s[0] == "▁" and s[-1] == "█"
    rows = column_chart([1.0, 1.5, 2.0], 30, 4, fmt="{:.1f}x")
    assert len(rows) == 4 and rows[0].startswith("2.0x│") and rows[-1].startswith("1.0x│")
    assert rows[0].endswith("█") and all(len(r) == 30 for r in rows)


def test_a_busy_store_keeps_the_last_frame_and_says_so(tmp_path, monkeypatch):
    from sqlalchemy.exc import OperationalError

    db = tmp_path / "arbor.db"
    _writer(db)
    feed = CampaignFeed(resolve_source(str(db)))
    feed.poll()
    nodes = dict(feed.state.nodes)

    def busy(*a, **k):
        raise OperationalError("SELECT", {}, Exception("database is locked"))

    monkeypatch.setattr(feed.store, "nodes_changed_since", busy)
    assert feed.poll() is False
    assert feed.state.poll.error == "database is locked" and feed.state.nodes == nodes
    assert "database is locked (retrying)" in _text(feed, 160, 30).replace("\n", "")


def test_the_latest_profile_event_is_kept_across_attach_and_polls(tmp_path):
    """A profile stored before attaching (older than the recent events) and one stored after both
    reach the frame; the newer replaces the older."""
    db = tmp_path / "arbor.db"
    store, camp, root = _writer(db)
    store.append_event(camp.id, "profile", {"why": "baseline", "ops": [{"op": "aten::addmm", "share": 0.7}]},
                       node_id=root.id, agent="profiler")
    for i in range(80):  # push it out of the attach-time window of recent events
        store.append_event(camp.id, "select", {"parent": root.id, "why": f"step {i}"})
    feed = CampaignFeed(resolve_source(str(db)))
    feed.poll()
    assert feed.state.profile_node == root.id and f"hot ops (node {root.id}) addmm 70%" in _text(feed)
    kid = _child(store, camp, root, 1)
    store.append_event(camp.id, "profile", {"why": "new best", "ops": [{"op": "aten::mv", "share": 0.55}]},
                       node_id=kid.id, agent="profiler")
    feed.poll()
    text = _text(feed)
    assert f"hot ops (node {kid.id}) mv 55%" in text and "addmm 70%" not in text

"""The dashboard rendered through rich's recording console against a real campaign's store."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from arbor.campaign.source import resolve_source
from arbor.dashboard import CampaignFeed, Dashboard, render_frame
from arbor.dashboard.feed import verdict_stats
from arbor.search_tree import open_store

PANEL_TITLES = ("progress vs budget", "environment", "best speedup over time", "tree",
                "latest verdicts", "agent activity")


def _render(feed: CampaignFeed, width: int, height: int) -> str:
    console = Console(record=True, width=width, height=height, file=io.StringIO(), force_terminal=True)
    render_frame(feed, console, width=width, height=height, poll=False)
    return console.export_text()


@pytest.fixture(scope="module")
def feed(shared):
    f = CampaignFeed(resolve_source(str(shared.yaml)))
    assert f.poll() is True
    yield f
    f.close()


@pytest.fixture(scope="module")
def truth(shared):
    store = open_store(f"sqlite:///{shared.db}", read_only=True)
    camp = store.get_campaign("dash")
    nodes = store.nodes(camp.id)
    verdicts = store.verdicts_after(camp.id, 0, limit=1000)
    events = store.events(camp.id, limit=10_000)
    ms = store.measurements_after(camp.id, 0, limit=1000, samples=False)
    data = dict(camp=camp, nodes=nodes, verdicts=verdicts, events=events, measurements=ms,
                evals=store.measurement_count(camp.id, distinct_candidates=True),
                counts=store.count_by_state(camp.id))
    store.close()
    return data


def test_every_panel_shows_the_campaign(feed, truth):
    text = _render(feed, 160, 60)
    for title in PANEL_TITLES:
        assert title in text, title
    camp = truth["camp"]
    assert "dash" in text and camp.status in text
    # progress against the budget the run used
    assert f"{truth['evals']} / 2" in text
    for state, n in truth["counts"].items():
        assert f"{state} {n}" in text
    if camp.stop_reason:
        assert camp.stop_reason[:30] in text
    # the tree: the root, and every node of this small campaign with its state
    for n in truth["nodes"]:
        assert f"[{n.id}] " in text
        label = n.move_id or "baseline"
        assert label[:20] in text
    # latest verdicts: decision and diagnosis of the newest one, with its speedup when measured
    newest = truth["verdicts"][-1]
    assert newest.decision in text and newest.diagnosis in text
    sp = verdict_stats(newest).get("speedup")
    if sp is not None:
        assert f"{sp:.3f}x" in text
    # agent activity: event totals and the last events
    assert f"{len(truth['events'])} events" in text
    assert truth["events"][-1].kind in text
    # environment from the latest fingerprint
    fp = next(m.fingerprint for m in reversed(truth["measurements"]) if m.fingerprint)
    assert f"{fp['device']} · {fp['device_name']}" in text
    assert "CPU run: no GPU clocks to lock" in text and "temperature" in text


def test_feed_agrees_with_the_store(feed, truth):
    st = feed.state
    assert st.evaluations == truth["evals"]
    assert {k: v for k, v in st.counts.items() if v} == truth["counts"]
    assert st.measurement_count == len(truth["measurements"])
    assert st.event_count == len(truth["events"])
    assert [v.id for v in st.verdicts] == [v.id for v in truth["verdicts"]][-len(st.verdicts):]
    best = [n for n in truth["nodes"] if n.state == "accepted" and n.value is not None]
    if best:
        assert st.best.id == max(best, key=lambda n: (n.value, -n.id)).id
        assert [n.id for n in st.best_path()][0] == truth["camp"].root_node_id


def test_an_idle_poll_reads_almost_nothing(feed):
    assert feed.poll() is False
    p = feed.state.poll
    assert p.changed == 0
    # the campaign row plus, at most, nodes inside the cursor's overlap window: never the tree
    assert p.rows <= 1 + len(feed.state.nodes)


@pytest.mark.parametrize("width,height", [(60, 30), (90, 60), (120, 40), (200, 55)])
def test_layout_fits_any_terminal_size(feed, width, height):
    text = _render(feed, width, height)
    lines = text.rstrip("\n").split("\n")
    assert len(lines) == height
    assert all(len(line) <= width for line in lines)
    assert "progress vs budget" in text
    if height >= 40:
        for title in PANEL_TITLES:
            assert title in text, (width, title)


def test_dashboard_renderable_reflows_to_the_console_size(feed):
    for width in (80, 140):
        console = Console(record=True, width=width, height=50, file=io.StringIO())
        console.print(Dashboard(feed))
        assert max(len(line) for line in console.export_text().splitlines()) == width


def test_progress_shows_the_node_in_flight_and_an_eta():
    from dataclasses import replace
    from datetime import timedelta

    from arbor.dashboard import panels
    from arbor.dashboard.feed import FeedState
    from arbor.dashboard.fmt import utcnow
    from arbor.search_tree.records import CampaignRecord, NodeRecord

    now = utcnow()
    camp = CampaignRecord(id=1, name="c", kind="kernel", spec={}, spec_hash="", status="running", stop_reason=None,
                          elapsed_s=30.0, root_node_id=1, created_at=now, updated_at=now)
    node = NodeRecord(id=7, campaign_id=1, parent_id=1, depth=1, state="running", artifact_sha="x",
                      specialist="h", move_id="fuse-gelu", family=None, hypothesis="", prior=0.5,
                      predicted_gain=None, value=None, speedup=None, diagnosis=None, reason=None, step=3,
                      created_at=now, updated_at=now - timedelta(seconds=12), finished_at=None)
    st = FeedState(waiting=None, campaign=camp, budget={"max_evaluations": 10, "max_wall_s": 600},
                   nodes={7: node}, last_activity=now)
    st.durations.extend([10.0, 10.0, 10.0])
    console = Console(record=True, width=100, file=io.StringIO())
    console.print(panels.progress_panel(st, 100, 12))
    text = console.export_text()
    assert "node 7 fuse-gelu" in text and "0:00:12 / ~0:00:10" in text
    assert "ETA" in text and "tokens" not in text
    console = Console(record=True, width=100, file=io.StringIO())
    console.print(panels.progress_panel(replace(st, campaign=replace(camp, status="finished")), 100, 12))
    assert "ETA" not in console.export_text()


def test_the_latest_profile_shows_as_hot_ops(feed, truth):
    """The loop profiles the baseline and each new best; the frame names the latest one's top ops."""
    profiles = [e for e in truth["events"] if e.kind == "profile"]
    assert feed.state.profile == (profiles[-1].payload if profiles else None)
    text = _render(feed, 160, 60)
    if profiles and not profiles[-1].payload.get("error"):
        top = profiles[-1].payload["ops"][0]
        assert f"hot ops (node {profiles[-1].node_id}) {top['op'].split('::')[-1]} {top['share']:.0%}" in text


def test_score_panel_names_the_hot_ops_of_a_profile_event():
    from arbor.dashboard import panels
    from arbor.dashboard.feed import FeedState

    ops = [{"op": "aten::addmm", "share": 0.62}, {"op": "aten::gelu", "share": 0.21},
           {"op": "aten::add", "share": 0.1}, {"op": "aten::copy_", "share": 0.05}, {"op": "aten::t", "share": 0.02}]
    st = FeedState(waiting=None, profile={"why": "new best", "ops": ops}, profile_node=5)
    st.best_series.extend([1.0, 1.3])
    console = Console(record=True, width=100, file=io.StringIO())
    console.print(panels.score_panel(st, 100, 9))
    text = console.export_text()
    assert "hot ops (node 5) addmm 62%, gelu 21%, add 10%, copy_ 5%, …" in text
    assert "best Critic value 1.300x" in text  # the chart keeps its caption under the extra line
    st = FeedState(waiting=None, profile={"error": "profile failed: boom"}, profile_node=1)
    console = Console(record=True, width=100, file=io.StringIO())
    console.print(panels.score_panel(st, 100, 9))
    assert "no profile (profile failed: boom)" in console.export_text()
    console = Console(record=True, width=100, file=io.StringIO())
    console.print(panels.score_panel(FeedState(waiting=None), 100, 9))
    assert "hot ops" not in console.export_text()

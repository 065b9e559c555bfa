"""One final best on every surface. A replayed campaign (seconds) whose final verification picks
a runner-up: the child (B, y) was accepted at 2.4x, the highest Critic value, but measured 2.0x
ever after, like its parent (B, x); side by side it does not beat the parent, so the parent is the
final best, with a verified median (~2.0x) below the child's Critic value. The dashboard's header,
its progress and score panels, the report's summary and histogram, ``arbor best`` and
``tree``/``show`` all name the parent and show its verified figure beside its Critic value —
none may fall back to the highest Critic value (the quickstart's "best 6.111x, node 4" beside
"best [3] 7.339x (verified)")."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from arbor.campaign.final_best import final_best, highest_value
from arbor.campaign.source import resolve_source
from arbor.cli.history import show as show_node
from arbor.cli.terminal import print_node
from arbor.dashboard import CampaignFeed, render_frame
from arbor.report.data import load as load_report
from arbor.report.plots import best_marker_labels
from arbor.report.render import summary_rows
from arbor.search_tree import open_store

from arbor.targets.landscape import Landscape

from tests.arbor.campaign.test_verify import _dump, _final_and_best, _ratio, _sp
from tests.arbor.helpers import arbor_json


def _landscape(tmp):  # type: ignore[no-untyped-def]
    """(B, x) runs 2.0x once and 2.1x ever after; its child (B, y) 2.4x once and 2.1x ever after.
    The seed replays both once-off runs first: the Critic values are 2.0x and 2.4x, and every
    later measurement of either reads 2.1x."""
    points = [
        {"knobs": {"K": "A", "M": "x"}, "runs": [_sp(1.0)] * 3},
        {"knobs": {"K": "B", "M": "x"}, "runs": [_sp(2.0)] + [_sp(2.1)] * 9},
        {"knobs": {"K": "B", "M": "y"}, "runs": [_sp(2.4)] + [_sp(2.1)] * 9},
        {"knobs": {"K": "A", "M": "y"}, "runs": [_sp(1.0)] * 3},
    ]
    path = _dump(tmp, "runner_up", points)
    ls = Landscape.model_validate_json(path.read_text())
    parent, child = ls.point({"K": "B", "M": "x"}), ls.point({"K": "B", "M": "y"})
    return path, next(s for s in range(5000) if _ratio(ls.replay(parent, s, 0)) < 2.05
                      and _ratio(ls.replay(child, s, 0)) > 2.3)


@pytest.fixture(scope="module")
def runner_up(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("final_best")
    path, seed = _landscape(tmp)
    spec, summary, event, _, _, _ = _final_and_best(tmp, path, seed)
    store = open_store(spec.store_url(), read_only=True)
    camp = store.list_campaigns()[0]
    final, top = final_best(store, camp.id), highest_value(store.nodes(camp.id))
    data = load_report(store, camp)
    store.close()
    assert final.verified and final.node.id == event["best"] == summary.best_node
    assert top is not None and top.id != final.node.id  # the case the surfaces disagreed on
    assert f"{final.speedup:.3f}" != f"{final.critic:.3f}"  # else no test here could tell the two apart
    return spec, summary, final, top, data


def _frame(url: str) -> str:
    feed = CampaignFeed(resolve_source(url))
    try:
        console = Console(record=True, width=200, height=50, file=io.StringIO())
        render_frame(feed, console, width=200, height=50)
        return console.export_text()
    finally:
        feed.close()


def test_the_final_best_reads_the_same_in_the_run_summary_and_arbor_best(runner_up):
    spec, summary, final, top, _ = runner_up
    assert summary.speedup == pytest.approx(final.speedup) and summary.node_speedup == final.critic
    assert final.critic < top.speedup  # the verified pick is not the highest Critic value
    best = arbor_json("best", spec.store_url(), "-o", str(spec.base_dir / "best.py"))
    assert best["node"] == final.node.id and best["speedup"] == pytest.approx(final.speedup)
    assert best["verified"] and best["node_speedup"] == final.critic
    header = (spec.base_dir / "best.py").read_text().splitlines()[1]
    assert f"speedup {final.speedup:.3f}x" in header and f"Critic value {final.critic:.3f}x" in header


def test_the_dashboard_names_one_best_in_its_header_progress_and_score_panels(runner_up):
    spec, _, final, top, _ = runner_up
    frame = _frame(spec.store_url())
    verified, critic = f"{final.speedup:.3f}x", f"{final.critic:.3f}x"
    assert f"best [{final.node.id}] {verified} (verified: median of 3 measurements, Critic value {critic})" in frame
    progress = next(line for line in frame.splitlines() if "│ best " in line or line.lstrip("│ ").startswith("best "))
    assert f"{verified} verified · Critic {critic}" in progress and f"node {final.node.id} " in progress
    assert f"node {top.id} " not in progress and f"{top.speedup:.3f}x" not in progress
    assert f"final best [{final.node.id}] {verified} verified, Critic value {critic}" in frame


def test_the_report_summary_and_histogram_mark_the_final_best(runner_up):
    _, _, final, top, data = runner_up
    assert data.best is not None and data.best.id == final.node.id
    rows = dict(summary_rows(data))
    assert rows["best"].startswith(f"node {final.node.id} ")
    assert f"{final.speedup:.3f}x (verified: median of 3 measurements" in rows["best"]
    assert f"Critic value {final.critic:.3f}x" in rows["best"]
    labels = best_marker_labels(data)
    assert labels and all(f"[{final.node.id}]" in label or "verified" in label for label in labels)
    assert any(f"{final.speedup:.2f}x verified, Critic value {final.critic:.2f}x" in label for label in labels)
    assert not any(f"[{top.id}]" in label for label in labels)


def test_tree_and_show_put_the_verified_figure_on_the_final_best(runner_up):
    spec, _, final, top, _ = runner_up
    rows = {r["id"]: r for r in arbor_json("tree", spec.store_url())}
    assert rows[final.node.id]["best_path"] and rows[final.node.id]["verified_speedup"] == pytest.approx(final.speedup)
    assert rows[final.node.id]["speedup"] == final.critic  # the Critic value stays the node's own
    assert not rows[top.id]["best_path"] and "verified_speedup" not in rows[top.id]
    store = open_store(spec.store_url(), read_only=True)
    try:
        shown, other = show_node(store, final.node.id), show_node(store, top.id)
    finally:
        store.close()
    console = Console(record=True, width=200, file=io.StringIO())
    print_node(console, shown)
    assert f"final best: {final.speedup:.3f}x verified, Critic value {final.critic:.3f}x" in console.export_text()
    assert other["final_best"] is None

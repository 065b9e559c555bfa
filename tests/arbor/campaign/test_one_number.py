"""One number per node on every surface. A finished (replayed) campaign whose best was verified:
the node's Critic value reads the same in history, tree, show, export, the run summary, ``best``,
the dashboard and the report; the verified median reads the same in the run summary, ``--json``,
``best``, the dashboard's header and the report's summary, each saying which number it is; and the
times and CI beside the reported speedup come from the one paired measurement that is that ratio."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from arbor.campaign.run import run_campaign
from arbor.campaign.source import resolve_source
from arbor.cli.terminal import print_summary
from arbor.dashboard import CampaignFeed, render_frame

from tests.arbor.helpers import arbor, arbor_json
from tests.arbor.campaign.test_verify import _dump, _run, _sp, _spec


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The best (B, y) measures 2.0x, 2.4x, 2.45x, its reference a little slower in the later runs:
    its Critic value and verified median differ, and so do the reference times of its runs. Run
    once for the module: both tests only read the finished store (each writes into its own folder)."""
    tmp_path = tmp_path_factory.mktemp("surfaces")
    points = [
        {"knobs": {"K": "A", "M": "x"}, "runs": [_sp(1.0)] * 3},
        {"knobs": {"K": "B", "M": "x"}, "runs": [_sp(1.5), _sp(1.52), _sp(1.48)]},
        {"knobs": {"K": "B", "M": "y"}, "runs": [_sp(2.0), _run(1.1, 1.1 / 2.4), _run(1.05, 1.05 / 2.45)]},
        {"knobs": {"K": "A", "M": "y"}, "runs": [_sp(0.5)] * 3},
    ]
    spec = _spec(tmp_path, _dump(tmp_path, "surfaces", points), seed=0, final=3)
    return spec, run_campaign(spec, lambda *a: None)


def test_every_surface_shows_the_same_number_for_the_same_node(finished):
    spec, s = finished
    url, node = spec.store_url(), s.best_node
    assert s.verified is not None and s.node_speedup is not None
    critic_value = s.node_speedup
    history = {r["id"]: r["speedup"] for r in arbor_json("history", url)}
    tree = {r["id"]: r["speedup"] for r in arbor_json("tree", url)}
    show = arbor_json("show", str(node), url)["node"]["speedup"]
    exported = {r["id"]: r["speedup"] for r in json.loads(arbor("export", url).stdout)["nodes"]}
    best = arbor_json("best", url, "-o", str(spec.base_dir / "best.py"))
    assert history[node] == tree[node] == show == exported[node] == best["node_speedup"] == critic_value
    assert history == tree == exported  # every node, not only the best

    # the reported (verified) number: the same in the summary, --json and `best`
    assert best["speedup"] == s.to_dict()["speedup"] == s.speedup == pytest.approx(s.verified["speedup"])
    # times and CI beside it belong to the measurement that is that ratio
    assert s.baseline_s / s.best_s == pytest.approx(s.speedup, rel=1e-9)
    assert s.ci[0] <= s.speedup <= s.ci[1]
    text = io.StringIO()
    print_summary(Console(file=text, width=200), s)
    out = text.getvalue()
    assert f"{s.speedup:.3f}x" in out and f"{critic_value:.3f}x" in out and "verified" in out


def test_the_dashboard_and_the_report_show_the_reported_number_and_say_which(finished, tmp_path):
    spec, s = finished
    url, node = spec.store_url(), s.best_node
    verified, critic_value = f"{s.speedup:.3f}x", f"{s.node_speedup:.3f}x"
    assert verified != critic_value  # else this test could not tell the two apart

    feed = CampaignFeed(resolve_source(url))
    try:
        console = Console(record=True, width=200, height=50, file=io.StringIO())
        render_frame(feed, console, width=200, height=50)
        frame = console.export_text()
    finally:
        feed.close()
    assert f"best [{node}] {verified} (verified: median of 3 measurements, Critic value {critic_value})" in frame
    assert f"[{node}] " in frame and critic_value in frame  # the tree: the node's Critic value

    arbor_json("report", url, "-o", str(tmp_path / "rep"))
    md = (tmp_path / "rep" / "report.md").read_text()
    html = (tmp_path / "rep" / "report.html").read_text()
    ci = f"95% CI {s.ci[0]:.3f}x – {s.ci[1]:.3f}x"
    row = f"node {node} "
    line = next(x for x in md.splitlines() if x.startswith("| best |"))
    assert row in line and f"{verified} (verified: median of 3 measurements; {ci}), Critic value {critic_value}" in line
    assert f"{verified} (verified: median of 3 measurements; {ci})" in html

"""One number per node on every surface. A finished (replayed) campaign whose best was verified:
the node's Critic value reads the same in history, tree, show, export, the run summary and
``best``; the verified median reads the same in the run summary, ``--json`` and ``best``; and the
times and CI beside the reported speedup come from the one paired measurement that is that ratio."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from arbor.campaign.run import run_campaign
from arbor.cli.terminal import print_summary

from tests.arbor.helpers import arbor, arbor_json
from tests.arbor.campaign.test_verify import _dump, _run, _sp, _spec


@pytest.fixture()
def finished(tmp_path):
    """The best (B, y) measures 2.0x, 2.4x, 2.45x, its reference a little slower in the later runs:
    its Critic value and verified median differ, and so do the reference times of its runs."""
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

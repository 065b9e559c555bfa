"""Change detection and exit codes: a re-run after an edit stops with one line (exit 1) until
the user picks --restart or --fork; a failed baseline exits 1 (replayed, so it takes seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from arbor.search_tree import open_store
from arbor.targets.landscape import FORMAT, Landscape

from tests.arbor.helpers import arbor


def _sp(speedup: float, n: int = 12) -> dict:
    return {"b": [1.0 * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)],
            "c": [(1.0 / speedup) * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)]}


def _landscape(tmp_path: Path, base_runs: list | None = None) -> Path:
    ls = Landscape.model_validate({
        "format": FORMAT, "name": "ch",
        "knobs": [{"name": "K", "values": ["A", "B"], "default": "A"}],
        "points": [{"knobs": {"K": "A"}, "runs": base_runs or [_sp(1.0)] * 3},
                   {"knobs": {"K": "B"}, "runs": [_sp(1.5)] * 3}],
        "campaign": {"critic": {"max_cv": 0.5}, "measurement": {"seeds": [0]}},
    })
    path = tmp_path / "ch.json"
    ls.dump(path)
    return path


def _campaign(tmp_path: Path, max_cv: float = 0.5) -> Path:
    spec = {"name": "ch", "target": {"kind": "replay", "landscape": "ch.json", "moves": "any"},
            "budget": {"max_evaluations": 3}, "critic": {"max_cv": max_cv, "min_speedup": 1.02}}
    p = tmp_path / "ch.yaml"
    p.write_text(yaml.safe_dump(spec))
    return p


@pytest.mark.slow  # seven `arbor run`s (23 s on the 2-core CI): on workers, this file starts first
def test_edit_then_rerun_stops_until_restart_or_fork(tmp_path):
    _landscape(tmp_path)
    spec = _campaign(tmp_path)
    first = arbor("run", str(spec), "-q", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert arbor("run", str(spec), "-q", cwd=tmp_path).returncode == 0  # unchanged: resumes

    _campaign(tmp_path, max_cv=0.4)  # a measurement-relevant edit
    changed = arbor("run", str(spec), "-q", cwd=tmp_path)
    assert changed.returncode == 1
    lines = [ln for ln in changed.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "spec (critic)" in lines[0] and "--restart" in lines[0] and "--fork" in lines[0]

    js = arbor("run", str(spec), "--json", cwd=tmp_path)
    assert js.returncode == 1 and json.loads(js.stdout)["exit_code"] == 1

    forked = arbor("run", str(spec), "-q", "--fork", "ch2", cwd=tmp_path)
    assert forked.returncode == 0, forked.stderr
    restarted = arbor("run", str(spec), "-q", "--restart", cwd=tmp_path)
    assert restarted.returncode == 0, restarted.stderr
    store = open_store(f"sqlite:///{tmp_path / 'arbor.db'}")
    try:
        names = sorted(c.name for c in store.list_campaigns())
        assert names == ["ch", "ch2", "ch@archived-1"]
        archived = store.get_campaign("ch@archived-1")
        assert store.nodes(archived.id)  # the old nodes are kept
        # only the Critic changed: the fork reused the measurements and judged them afresh
        ch2 = store.get_campaign("ch2")
        forked = store.events(ch2.id, kinds=["forked"])
        assert forked and forked[0].payload["reused"] >= 2
        copied = [n for n in store.nodes(ch2.id) if store.measurements(n.id)]
        assert all(n.state in ("accepted", "rejected", "failed") for n in copied)
    finally:
        store.close()
    # the restarted campaign now resumes quietly under the new settings
    assert arbor("run", str(spec), "-q", cwd=tmp_path).returncode == 0


def test_problem_edit_is_named(tmp_path):
    _landscape(tmp_path)
    spec = _campaign(tmp_path)
    assert arbor("run", str(spec), "-q", cwd=tmp_path).returncode == 0
    _landscape(tmp_path, base_runs=[_sp(1.0)] * 2)
    r = arbor("run", str(spec), "-q", cwd=tmp_path)
    assert r.returncode == 1 and "problem file (ch.json)" in r.stderr
    r = arbor("run", str(spec), "--fork", "fresh", cwd=tmp_path)
    assert r.returncode == 0 and "starting fresh: the problem file changed" in r.stdout, r.stdout + r.stderr


def test_unstable_baseline_exits_1(tmp_path):
    # noisy in what the Critic judges: the paired per-round ratios of the A/A rounds
    noisy = [{"b": [1.0, 3.0, 0.5, 2.5] * 3, "c": [3.0, 1.0, 2.5, 0.5] * 3}] * 3
    _landscape(tmp_path, base_runs=noisy)
    spec = _campaign(tmp_path, max_cv=0.05)
    r = arbor("run", str(spec), cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "campaign failed: baseline" in r.stderr

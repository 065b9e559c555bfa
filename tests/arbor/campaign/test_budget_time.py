"""Budgets that hold: with measurements that take real time (a replay paced at its recorded
durations), a campaign stops starting steps that would not fit and ends within 10% of max_wall_s,
its final verification included."""

from __future__ import annotations

import time
from pathlib import Path

from arbor.campaign.run import run_campaign
from arbor.spec import parse_spec
from arbor.targets.landscape import FORMAT, Landscape


def _run(speedup: float, s: float, n: int = 12) -> dict:
    return {"b": [1.0 * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)],
            "c": [(1.0 / speedup) * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)], "s": s}


def _landscape(tmp_path: Path, s: float) -> Path:
    values = [str(v) for v in range(8)]
    points = [{"knobs": {"K": v}, "runs": [_run(1.0 + 0.1 * i, s)] * 3} for i, v in enumerate(values)]
    ls = Landscape.model_validate({"format": FORMAT, "name": "paced",
                                   "knobs": [{"name": "K", "values": values, "default": "0"}],
                                   "points": points, "campaign": {"critic": {"max_cv": 0.5}}})
    path = tmp_path / "paced.json"
    ls.dump(path)
    return path


def test_wall_budget_overrun_at_most_10_percent(tmp_path):
    landscape = _landscape(tmp_path, s=0.6)
    max_wall = 6.0
    spec = parse_spec({"name": "paced", "target": {"kind": "replay", "landscape": str(landscape), "moves": "any",
                                                   "pace": 1.0},
                       "budget": {"max_evaluations": 100, "max_wall_s": max_wall},
                       "critic": {"max_cv": 0.5, "min_speedup": 1.02, "final_measurements": 3},
                       "store": {"url": f"sqlite:///{tmp_path / 'p.db'}"}}, "<test>", tmp_path)
    events = []
    t0 = time.monotonic()
    summary = run_campaign(spec, lambda kind, data: events.append((kind, data)))
    wall = time.monotonic() - t0
    assert summary.stop_reason.startswith("budget"), summary.stop_reason
    assert summary.elapsed_s <= max_wall * 1.10, (summary.elapsed_s, summary.stop_reason)
    assert wall <= max_wall * 1.10 + 2.0  # + process set-up, which the campaign clock does not count
    measuring = [d for k, d in events if k == "measuring"]
    assert any(d.get("eta_s") is not None for d in measuring) and any(d.get("expected_s") for d in measuring)
    assert summary.verified is not None  # the final verification ran inside the budget

"""Replayed campaigns with several workers: real orchestrator, Critic, store and loop; measurements
drawn from a recorded landscape, each sleeping a sliver of its recorded time so several overlap."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from arbor.spec import parse_spec

REPO = Path(__file__).resolve().parents[3]
LANDSCAPE = REPO / "benchmarks" / "landscapes" / "cpu_chunked_softmax.json"


def replay_spec(tmp_path: Path, name: str, workers: int, executor: dict | None = None,
                max_evaluations: int = 8, time_scale: float = 0.01):
    data = {
        "name": name,
        "target": {"kind": "replay", "landscape": str(LANDSCAPE), "seed": 0, "time_scale": time_scale},
        "budget": {"max_evaluations": max_evaluations, "max_wall_s": 600},
        "agents": {"seed": 0},
        "measurement": {"seeds": [0, 1, 2]},
        "critic": {"max_cv": 0.6, "max_remeasures": 2},
        "executor": {"workers": workers, **(executor or {})},
        "store": {"url": f"sqlite:///{tmp_path / 'arbor.db'}"},
    }
    return parse_spec(data, f"<{name}>", tmp_path)


def rows(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def assert_nothing_lost_or_doubled(db: Path) -> None:
    """Every node finished; no candidate measured twice as a first measurement; no (parent, move)
    or artifact proposed twice; no node left running."""
    assert rows(db, "SELECT id, state FROM nodes WHERE state NOT IN ('accepted','rejected','failed','pruned')") == []
    assert rows(db, "SELECT node_id, COUNT(*) FROM measurements WHERE purpose='primary' "
                    "GROUP BY node_id HAVING COUNT(*) > 1") == []
    assert rows(db, "SELECT node_id, attempt, COUNT(*) FROM measurements GROUP BY node_id, attempt "
                    "HAVING COUNT(*) > 1") == []
    assert rows(db, "SELECT parent_id, move_id, COUNT(*) FROM nodes WHERE parent_id IS NOT NULL "
                    "GROUP BY parent_id, move_id HAVING COUNT(*) > 1") == []
    assert rows(db, "SELECT artifact_sha, COUNT(*) FROM nodes GROUP BY artifact_sha HAVING COUNT(*) > 1") == []
    assert rows(db, "SELECT node_id FROM leases") == []

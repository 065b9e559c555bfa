"""Campaigns with several measurements in flight (executor.workers > 1), on the local executor."""

from __future__ import annotations

import pytest

import arbor.campaign.parallel as parallel
from arbor.campaign.run import run_campaign
from arbor.sandbox.executors import Done, LocalExecutor

from .parallel_helpers import assert_nothing_lost_or_doubled, replay_spec, rows


def _events(kinds):
    seen = []
    return seen, (lambda kind, data: seen.append((kind, data)) if kind in kinds else None)


def test_three_workers_overlap_stay_in_budget_and_verify(tmp_path):
    spec = replay_spec(tmp_path, "par3", workers=3, max_evaluations=8)
    seen, report = _events({"measuring"})
    s = run_campaign(spec, report)
    db = tmp_path / "arbor.db"
    assert s.stop_reason.startswith("budget: 8 evaluations"), s.stop_reason
    assert s.verified is not None and s.speedup > 1.0  # final verification ran on the workers
    assert_nothing_lost_or_doubled(db)
    distinct = rows(db, "SELECT COUNT(DISTINCT m.node_id) FROM measurements m JOIN nodes n ON n.id = m.node_id "
                        "WHERE n.parent_id IS NOT NULL")[0][0]
    assert distinct == 8  # work in flight counts against the budget: no overshoot
    workers = {d["worker"] for _, d in seen if d.get("worker")}
    assert len(workers) == 3  # every slot measured
    assert rows(db, "SELECT payload FROM events WHERE kind='executor'")  # the run says how it measured


def test_workers_1_is_the_serial_loop(tmp_path):
    spec = replay_spec(tmp_path, "serial", workers=1, max_evaluations=3)
    seen, report = _events({"measuring"})
    run_campaign(spec, report)
    assert all("worker" not in d for _, d in seen)
    assert rows(tmp_path / "arbor.db", "SELECT COUNT(*) FROM events WHERE kind='executor'") == [(0,)]


class _LosesFirstResult(LocalExecutor):
    """A worker that dies mid-measurement: the first task's result never arrives."""

    def _collect(self, timeout):
        out = super()._collect(timeout)
        for i, d in enumerate(out):
            if not getattr(self, "_lost_one", False) and d.result is not None and d.key != 1:
                self._lost_one = True
                out[i] = Done(d.key, d.worker, lost=f"{d.worker} died mid-measurement (test)")
        return out


def test_a_lost_worker_requeues_its_node_once_and_loses_nothing(tmp_path, monkeypatch):
    def open_losing(ctx):
        return _LosesFirstResult(parallel.plan_slots(2, "none"), parallel._slot_runner_factory(ctx.spec))

    monkeypatch.setattr(parallel, "open_executor", open_losing)
    spec = replay_spec(tmp_path, "lost", workers=2, max_evaluations=5)
    s = run_campaign(spec, lambda *a: None)
    db = tmp_path / "arbor.db"
    lost = rows(db, "SELECT node_id, json_extract(payload, '$.requeued') FROM events WHERE kind='worker_lost'")
    assert len(lost) == 1 and lost[0][1] == 1
    nid = lost[0][0]
    assert rows(db, f"SELECT attempt, purpose FROM measurements WHERE node_id={nid} AND attempt=1") == [(1, "primary")]
    assert_nothing_lost_or_doubled(db)
    assert s.stop_reason.startswith("budget: 5 evaluations")


def test_too_many_local_workers_is_one_line(tmp_path):
    from arbor.sandbox.runner import SandboxError

    from arbor.spec import load_spec

    from .parallel_helpers import REPO

    k = load_spec(REPO / "campaigns" / "quickstart.yaml")
    k.store.url = f"sqlite:///{tmp_path / 'k.db'}"
    k.executor = k.executor.model_copy(update={"workers": 64})
    with pytest.raises(SandboxError, match=r"executor.workers=64 .* lower executor.workers"):
        run_campaign(k, lambda *a: None)

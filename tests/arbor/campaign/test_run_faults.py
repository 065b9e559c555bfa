"""Faults during a run: a finished measurement survives a store that refuses to write it (retried
in memory, or spilled and landed by the next run), and a run that lost its lease stops writing."""

from __future__ import annotations

import json
import sqlite3

import pytest
from sqlalchemy.exc import OperationalError

from arbor.campaign.run import run_campaign
from arbor.search_tree import open_store
from arbor.spec import parse_spec
from benchmarks.synthetic import make_landscape


def _spec(tmp_path, evaluations=4):
    make_landscape().dump(tmp_path / "land.json")
    return parse_spec({"name": "sr", "target": {"kind": "replay", "landscape": "land.json"},
                       "budget": {"max_evaluations": evaluations, "max_wall_s": 300},
                       "critic": {"min_speedup": 1.02}}, "sr.yaml", tmp_path)


def _full() -> OperationalError:
    return OperationalError("INSERT INTO measurements", {}, sqlite3.OperationalError("database or disk is full"))


def _failing(store, times: int):
    real = store.record_measurement
    left = [times]

    def record(*a, **kw):
        if left[0] > 0:
            left[0] -= 1
            raise _full()
        return real(*a, **kw)

    store.record_measurement = record


def test_transient_disk_full_is_retried_in_memory(tmp_path, monkeypatch):
    monkeypatch.setenv("ARBOR_STORE_RETRY_S", "30")
    spec = _spec(tmp_path)
    store = open_store(spec.store_url())
    _failing(store, 2)
    seen = []
    summary = run_campaign(spec, lambda kind, data: seen.append(kind), store=store)
    assert summary.status == "finished"
    assert seen.count("store_retry") == 1
    store.close()


def test_lasting_fault_spills_and_the_next_run_lands_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ARBOR_STORE_RETRY_S", "0")
    spec = _spec(tmp_path)
    store = open_store(spec.store_url())
    _failing(store, 10**6)
    with pytest.raises(OperationalError):
        run_campaign(spec, lambda *_: None, store=store)
    spilled = list((spec.runs_dir() / "pending_measurements").glob("*.json"))
    assert len(spilled) == 1
    data = json.loads(spilled[0].read_text())
    assert store.get_campaign("sr").status == "interrupted"
    store.close()

    store = open_store(spec.store_url())
    assert run_campaign(spec, lambda *_: None, store=store).status == "finished"
    landed = store.measurements(data["node"])[data["attempt"] - 1]
    assert landed.baseline_samples == data["result"]["baseline_samples"]  # landed, not re-measured
    assert not list((spec.runs_dir() / "pending_measurements").glob("*.json"))
    store.close()


def test_a_run_that_lost_its_lease_stops_writing(tmp_path, monkeypatch):
    import time

    from sqlalchemy import update

    import arbor.campaign.run as campaign
    from arbor.search_tree.sql.models import CampaignLease
    from arbor.search_tree.store import CampaignBusy

    monkeypatch.setattr(campaign, "HEARTBEAT_S", 0.05)
    spec = _spec(tmp_path, evaluations=20)
    store = open_store(spec.store_url())

    def report(kind, data):
        if kind == "verdict" and data["node"].parent_id is not None:  # as if we stalled past the limit
            with store._tx() as s:
                s.execute(update(CampaignLease).values(owner="someone-else"))
            time.sleep(0.3)

    with pytest.raises(CampaignBusy, match="took the campaign over"):
        run_campaign(spec, report, store=store)
    assert store.campaign_owner(store.get_campaign("sr").id)["owner"] == "someone-else"
    assert store.get_campaign("sr").status == "running"  # the new owner's, untouched by us
    store.close()

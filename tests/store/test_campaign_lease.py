"""One writer per campaign: the campaign lease on every storage (SQLite and PostgreSQL)."""

import os
import subprocess
import sys
import threading

import pytest
from sqlalchemy import update

from arbor.search_tree.sql.models import CampaignLease, utcnow
from arbor.sandbox.runners.proctree import pid_alive
from arbor.search_tree import open_store
from arbor.search_tree.store import CampaignBusy

from datetime import timedelta


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_second_owner_refused_while_first_lives(store):
    c = store.get_or_create_campaign("c", "kernel", {})
    assert store.acquire_campaign(c.id, "a", 60) is None
    assert store.acquire_campaign(c.id, "a", 60) is None  # re-entrant for its owner
    with store._tx() as s:  # a live owner that is another process on this host
        s.execute(update(CampaignLease).values(pid=os.getppid()))
    with pytest.raises(CampaignBusy, match=rf"pid {os.getppid()} on host \S+"):
        store.acquire_campaign(c.id, "b", 60)
    assert store.campaign_heartbeat(c.id, "a") and not store.campaign_heartbeat(c.id, "b")


def test_dead_or_stale_owner_taken_over_and_release_requeues(store):
    c = store.get_or_create_campaign("c", "kernel", {})
    store.acquire_campaign(c.id, "a", 60)
    with store._tx() as s:
        s.execute(update(CampaignLease).values(pid=_dead_pid()))
    prev = store.acquire_campaign(c.id, "b", 60, pid_alive=pid_alive)
    assert prev["owner"] == "a"
    assert not store.campaign_heartbeat(c.id, "a")  # the old owner learns it lost the campaign
    with store._tx() as s:  # alive pid but no heartbeat for longer than the stale limit
        s.execute(update(CampaignLease).values(pid=os.getppid(), heartbeat_at=utcnow() - timedelta(seconds=120)))
    assert store.acquire_campaign(c.id, "c", 60)["owner"] == "b"
    sha = store.put_artifact("x", "k")
    n = store.add_node(c.id, sha, "t", state="queued")
    store.start_running(n.id, "c")
    assert store.release_campaign(c.id, "c") == [n.id]
    assert store.get_node(n.id).state == "queued"
    assert store.acquire_campaign(c.id, "d", 60) is None  # released: free for anyone


def test_racing_acquirers_exactly_one_wins(store_url):
    stores = [open_store(store_url) for _ in range(4)]
    c = stores[0].get_or_create_campaign("race", "kernel", {})
    won, busy = [], []
    barrier = threading.Barrier(len(stores))

    def go(i, s):
        barrier.wait()
        try:
            s.acquire_campaign(c.id, f"o{i}", 60)
            won.append(i)
        except CampaignBusy:
            busy.append(i)

    # one process, so the live-owner check needs another pid: other owners look alive as our parent
    import arbor.search_tree.sql.leases as leases

    real = leases.owner_dead
    leases.owner_dead = lambda *a: False
    try:
        ts = [threading.Thread(target=go, args=(i, s)) for i, s in enumerate(stores)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        leases.owner_dead = real
        for s in stores:
            s.close()
    assert len(won) == 1 and len(busy) == 3


def test_campaign_created_once_under_a_race(store_url):
    stores = [open_store(store_url) for _ in range(4)]
    barrier = threading.Barrier(len(stores))
    ids = []

    def go(s):
        barrier.wait()
        ids.append(s.get_or_create_campaign("same", "kernel", {}).id)

    ts = [threading.Thread(target=go, args=(s,)) for s in stores]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for s in stores:
        s.close()
    assert len(ids) == 4 and len(set(ids)) == 1


def test_poison_node_failed_after_max_crashes(store):
    c = store.get_or_create_campaign("c", "kernel", {})
    n = store.add_node(c.id, store.put_artifact("x", "k"), "t", state="queued")
    for crash in (1, 2):
        store.start_running(n.id, "dead")
        assert store.requeue_orphans(c.id, stale_after_s=-1, max_crashes=3) == [n.id], crash
    store.start_running(n.id, "dead")
    assert store.requeue_orphans(c.id, stale_after_s=-1, max_crashes=3) == []
    node = store.get_node(n.id)
    assert node.state == "failed" and node.diagnosis == "crashed_runner"
    assert "3 times" in node.reason
    assert store.verdicts(n.id)[-1].diagnosis == "crashed_runner"


def test_deleting_a_campaign_a_killed_run_still_leases(store):
    """A run killed without its clean stop leaves its campaign lease; ``arbor campaigns rm`` must
    still remove the campaign (it raised a foreign-key error instead)."""
    c = store.get_or_create_campaign("killed", "kernel", {})
    other = store.get_or_create_campaign("kept", "kernel", {})
    store.acquire_campaign(c.id, "a", 60)
    store.acquire_campaign(other.id, "b", 60)
    store.delete_campaign(c.id)
    assert store.get_campaign("killed") is None
    with pytest.raises(CampaignBusy):  # the other campaign's lease is untouched
        with store._tx() as s:
            s.execute(update(CampaignLease).where(CampaignLease.campaign_id == other.id).values(pid=os.getppid()))
        store.acquire_campaign(other.id, "c", 60)

"""Store contract tests, parametrized over storages (as Optuna does): SQLite always, PostgreSQL
where a private server can be started (tests/pg_server.py) or ARBOR_TEST_PG_URL names one."""

import os
import threading

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from arbor.search_tree.sql.migrate import head_revision
from arbor.search_tree import open_store
from arbor.search_tree.store import DuplicateArtifact, IllegalTransition, StoreError, artifact_sha

# the ``store`` fixture (SQLite, and PostgreSQL with a fresh database per test) is in conftest.py


def _node(store, cid, content="x = 1", parent=None, **kw):
    sha = store.put_artifact(content, "kernel_source")
    return store.add_node(cid, sha, "test", parent_id=parent, **kw)


def test_migration_applied_and_wal(tmp_path):
    s = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    with s.engine.connect() as c:
        assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert c.execute(text("select version_num from alembic_version")).scalar() == head_revision()
        assert c.execute(text("PRAGMA busy_timeout")).scalar() == 30000
    s.close()
    # reopening an up-to-date store is a no-op, not a second migration
    s2 = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    assert s2.list_campaigns() == []


def test_artifacts_are_content_addressed(store):
    a = store.put_artifact("print(1)", "kernel_source")
    b = store.put_artifact("print(1)", "kernel_source")
    assert a == b == artifact_sha("print(1)")
    assert store.get_artifact(a) == "print(1)"
    with pytest.raises(StoreError):
        store.get_artifact("0" * 64)


def test_same_artifact_never_gets_two_nodes(store):
    c = store.get_or_create_campaign("c", "kernel", {})
    n = _node(store, c.id)
    with pytest.raises(DuplicateArtifact) as e:
        _node(store, c.id)
    assert e.value.node_id == n.id
    # another campaign may hold the same artifact
    c2 = store.get_or_create_campaign("c2", "kernel", {})
    assert _node(store, c2.id).artifact_sha == n.artifact_sha


def test_state_machine_and_finished_nodes_immutable(store):
    c = store.get_or_create_campaign("c", "kernel", {})
    n = _node(store, c.id)
    with pytest.raises(IllegalTransition):
        store.transition(n.id, "accepted")
    store.transition(n.id, "queued")
    store.start_running(n.id, "owner-1")
    m = store.record_measurement(n.id, 1, "primary", {"status": "ok", "baseline_samples": [1.0]}, "local")
    assert store.get_node(n.id).state == "measured"
    store.record_verdict(n.id, m.id, "accept", "baseline", "fine", [], final_state="accepted", value=0.0)
    assert store.get_node(n.id).state == "accepted"
    with pytest.raises(IllegalTransition):
        store.transition(n.id, "rejected")
    # the database itself refuses, even behind the store's back
    with pytest.raises(DBAPIError):
        with store.engine.begin() as conn:
            conn.execute(text("update nodes set value = 5 where id = :i"), {"i": n.id})


def test_events_append_only(store):
    c = store.get_or_create_campaign("c", "kernel", {})
    eid = store.append_event(c.id, "note", {"a": 1}, prompt_tokens=3)
    assert [e.id for e in store.events(c.id)] == [eid]
    with pytest.raises(DBAPIError):
        with store.engine.begin() as conn:
            conn.execute(text("delete from events"))
    with pytest.raises(DBAPIError):
        with store.engine.begin() as conn:
            conn.execute(text("update events set kind='x'"))


def test_measurement_attempt_unique(store):
    c = store.get_or_create_campaign("c", "kernel", {})
    n = _node(store, c.id)
    store.transition(n.id, "queued")
    store.start_running(n.id, "o")
    store.record_measurement(n.id, 1, "primary", {"status": "ok"}, "local")
    with pytest.raises(StoreError):
        store.record_measurement(n.id, 1, "primary", {"status": "ok"}, "local")
    assert store.measurement_count(c.id) == 1


def test_orphans_of_dead_owner_requeued(store):
    c = store.get_or_create_campaign("c", "kernel", {})
    n = _node(store, c.id)
    store.transition(n.id, "queued")
    store.start_running(n.id, "me")
    # alive (this process) and fresh: stays running
    seen = []
    alive = lambda pid: seen.append(pid) or pid != 999999999  # noqa: E731 - the caller's process check
    assert store.requeue_orphans(c.id, stale_after_s=60, pid_alive=alive) == []
    assert seen == [os.getpid()]  # asked about the lease's pid
    # a dead pid on this host: re-queued at once, but only by a caller that can tell (the store
    # itself knows leases, not processes)
    with store.engine.begin() as conn:
        conn.execute(text("update leases set pid = 999999999"))
    assert store.requeue_orphans(c.id, stale_after_s=60) == []
    assert store.requeue_orphans(c.id, stale_after_s=60, pid_alive=alive) == [n.id]
    assert store.get_node(n.id).state == "queued"
    assert any(e.kind == "requeued" for e in store.events(c.id))


def test_stale_heartbeat_requeued(store):
    c = store.get_or_create_campaign("c", "kernel", {})
    n = _node(store, c.id)
    store.transition(n.id, "queued")
    store.start_running(n.id, "me")
    assert store.heartbeat("me") == 1
    assert store.requeue_orphans(c.id, stale_after_s=-1) == [n.id]


def test_read_only_query_enforced(store):
    c = store.get_or_create_campaign("c", "kernel", {})
    _node(store, c.id)
    cols, rows = store.read_only_query("select id, state from nodes")
    assert cols == ["id", "state"] and rows == [(1, "proposed")]
    for bad in ("delete from nodes", "select 1; drop table nodes", "update nodes set state='x'"):
        with pytest.raises(StoreError):
            store.read_only_query(bad)
    # a write hidden in a CTE is refused by the database itself
    with pytest.raises(StoreError):
        store.read_only_query("with x as (select 1) insert into artifacts select 'a','b','c',1,'2020-01-01'")
    assert store.read_only_query("select count(*) from nodes")[1] == [(1,)]


def test_concurrent_writers_do_not_lock(tmp_path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    s1, s2 = open_store(url), open_store(url)
    c = s1.get_or_create_campaign("c", "kernel", {})
    errors = []

    def writer(s, tag):
        try:
            for i in range(40):
                s.append_event(c.id, "tick", {"tag": tag, "i": i})
        except Exception as exc:  # pragma: no cover - the assertion reports it
            errors.append(exc)

    ts = [threading.Thread(target=writer, args=(s, t)) for s, t in ((s1, "a"), (s2, "b"))]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert errors == []
    assert len(s1.events(c.id)) == 80


def test_count_by_state_and_campaign_spec_update(store):
    c = store.get_or_create_campaign("c", "kernel", {"a": 1})
    c2 = store.get_or_create_campaign("c", "kernel", {"a": 2})
    assert c2.id == c.id and c2.spec == {"a": 2}
    _node(store, c.id, "a")
    n = _node(store, c.id, "b")
    store.transition(n.id, "queued")
    assert store.count_by_state(c.id) == {"proposed": 1, "queued": 1}
    assert store.add_elapsed(c.id, 2.5) == 2.5
    assert store.add_elapsed(c.id, 1.0) == 3.5


def test_remeasure_verdict_and_requeue_are_one_transaction(store):
    c = store.get_or_create_campaign("c", "kernel", {})
    n = _node(store, c.id)
    store.transition(n.id, "queued")
    store.start_running(n.id, "o")
    m = store.record_measurement(n.id, 1, "primary", {"status": "ok"}, "local")
    store.record_verdict(n.id, m.id, "remeasure", "unstable", "noisy", [], requeue=True)
    assert store.get_node(n.id).state == "queued"
    assert [v.decision for v in store.verdicts(n.id)] == ["remeasure"]

"""Campaigns on a real Ray cluster: one started by ``ray.init`` on this machine, and a two-node
cluster on one host (Ray's cluster utilities). One cluster per kind for the whole module: Ray
takes ~10 s to start. Skipped with a reason where Ray is not installed."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'arbor-opt[ray]')")

import arbor.campaign.parallel as parallel  # noqa: E402
from arbor.campaign.run import run_campaign  # noqa: E402
from arbor.spec_runners import remote_runner_factory  # noqa: E402

from .parallel_helpers import REPO, assert_nothing_lost_or_doubled, replay_spec, rows  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]
SMALL = dict(include_dashboard=False, object_store_memory=80 * 1024 * 1024)


def _running(db: Path) -> int:
    """Nodes in flight; 0 until the campaign's process has created the store's schema (the file
    exists a moment before its tables, longer on a loaded machine)."""
    if not db.exists():
        return 0
    try:
        return rows(db, "SELECT COUNT(*) FROM nodes WHERE state='running'")[0][0]
    except sqlite3.OperationalError:
        return 0


def _pid_gone(pid: int, within_s: float = 30.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def _capture_executors(monkeypatch) -> list:
    made = []
    real = parallel.open_executor

    def spy(ctx):
        ex = real(ctx)
        made.append(ex)
        return ex

    monkeypatch.setattr(parallel, "open_executor", spy)
    return made


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, log_to_driver=False, **SMALL)
    yield
    ray.shutdown()


def test_two_ray_workers_on_this_machine_complete_a_campaign(tmp_path, local_ray, monkeypatch):
    made = _capture_executors(monkeypatch)
    spec = replay_spec(tmp_path, "ray1", workers=2, executor={"kind": "ray"}, max_evaluations=6)
    s = run_campaign(spec, lambda *a: None)
    assert s.stop_reason.startswith("budget: 6 evaluations") and s.verified is not None
    assert_nothing_lost_or_doubled(tmp_path / "arbor.db")
    (ex,) = made
    assert all(_pid_gone(w["pid"]) for w in ex.where)  # closing the campaign ends its actors
    assert ray.is_initialized()  # the cluster was the user's: Arbor leaves it running


def test_a_ray_worker_measures_a_kernel_in_the_campaigns_sandbox(local_ray):
    """The actor holds the campaign's runner (the local sandbox here) and its own clock guard:
    a real candidate is measured there and the fingerprint is the worker's machine."""
    from arbor.sandbox.executors.ray_executor import RayExecutor
    from arbor.spec import load_spec
    from arbor.targets import make_adapter

    spec = load_spec(REPO / "campaigns" / "quickstart.yaml")
    spec.measurement = spec.measurement.model_copy(update={"time_budget_s": 0.2, "warmup_s": 0.05})
    target = make_adapter(spec)
    ex = RayExecutor(1, remote_runner_factory(spec))
    try:
        ex.submit("root", target.worker_task(target.root_source()))
        (d,) = ex.collect(timeout=300)
    finally:
        ex.close()
    assert d.result["status"] == "ok", d.result.get("error_text")
    assert d.result["candidate_samples"] and "cpu_model" in d.result["fingerprint"]


@pytest.fixture(scope="module")
def two_nodes(local_ray):
    from ray.cluster_utils import Cluster

    ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, **SMALL})
    cluster.add_node(num_cpus=1, object_store_memory=SMALL["object_store_memory"])
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def test_two_nodes_a_worker_killed_mid_measurement_loses_nothing(tmp_path, two_nodes, monkeypatch):
    made = _capture_executors(monkeypatch)
    killed = []

    def report(kind, data):  # kill worker 0 the moment it starts its third measurement
        if kind == "measuring" and str(data.get("worker", "")).startswith("ray worker 0"):
            killed.append(data["node"].id)
            if len(killed) == 3:
                ray.kill(made[0].actor(0), no_restart=True)

    spec = replay_spec(tmp_path, "ray2", workers=2, executor={"kind": "ray", "address": two_nodes.address},
                       max_evaluations=6, time_scale=0.05)
    s = run_campaign(spec, report)
    db = tmp_path / "arbor.db"
    (ex,) = made
    assert len({w["node"] for w in ex.where}) == 2  # one actor per node
    lost = rows(db, "SELECT node_id, json_extract(payload, '$.requeued') FROM events WHERE kind='worker_lost'")
    assert lost == [(killed[2], 1)]
    assert rows(db, f"SELECT COUNT(*) FROM measurements WHERE node_id={killed[2]} AND attempt=1") == [(1,)]
    assert_nothing_lost_or_doubled(db)
    assert s.stop_reason.startswith("budget: 6 evaluations") and s.verified is not None


def test_orchestrator_killed_leaves_no_actor_and_the_rerun_resumes(tmp_path, two_nodes):
    spec = replay_spec(tmp_path, "ray3", workers=2, executor={"kind": "ray", "address": two_nodes.address},
                       max_evaluations=6, time_scale=0.3)
    path = tmp_path / "ray3.json"
    data = spec.model_dump(mode="json")
    path.write_text(json.dumps(data))
    log = tmp_path / "log.jsonl"
    code = ("import json, sys; from arbor.spec import parse_spec; from arbor.campaign.run import run_campaign; "
            "from pathlib import Path; p = Path(sys.argv[1]); "
            "s = parse_spec(json.loads(p.read_text()), 'x', p.parent); "
            "f = open(sys.argv[2], 'a'); "
            "run_campaign(s, lambda k, d: (f.write(json.dumps({'kind': k, 'text': d.get('text'), "
            "'worker': d.get('worker')}) + '\\n'), f.flush()))")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path), str(log)], cwd=REPO, start_new_session=True)
    try:
        db = tmp_path / "arbor.db"
        end = time.monotonic() + 120
        while time.monotonic() < end:  # wait until both workers are measuring
            running = _running(db)
            if running >= 2:
                break
            time.sleep(0.2)
        assert running >= 2, "the campaign never had two measurements in flight"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    desc = next(x["text"] for x in lines if x["kind"] == "sandbox_info" and "ray executor" in (x["text"] or ""))
    pids = [int(p.split(")")[0]) for p in desc.split(" pid ")[1:]]
    assert len(pids) == 2 and all(_pid_gone(p) for p in pids)  # Ray reclaims a dead driver's actors
    # the re-run requeues what the dead run had in flight and finishes without measuring anything twice
    s = run_campaign(parse_again(path), lambda *a: None)
    assert s.stop_reason.startswith("budget: 6 evaluations")
    assert rows(db, "SELECT COUNT(*) FROM events WHERE kind='requeued'")[0][0] >= 2
    assert_nothing_lost_or_doubled(db)


def parse_again(path):
    from arbor.spec import parse_spec

    return parse_spec(json.loads(path.read_text()), "x", path.parent)


def test_a_hung_worker_is_killed_at_its_limit_and_replaced(two_nodes):
    from arbor.sandbox.executors.ray_executor import RayExecutor
    from arbor.sandbox.runner import make_runner
    from arbor.targets.replay import _canned

    # the limit counts from submit, so it includes starting the replacement actor (a process and
    # its imports): 2 s was too short for that on a loaded 2-core machine (load 7: killed as hung)
    ex = RayExecutor(1, partial(make_runner, "local"), address=two_nodes.address, hang_after_s=8.0)
    try:
        pid = ex.where[0]["pid"]
        t0 = time.monotonic()
        ex.submit("hung", partial(_canned, {"duration_s": 600.0}, 1.0))  # sleeps 10 minutes
        done = []
        while not done and time.monotonic() - t0 < 60:
            done = ex.collect(timeout=5)
        assert done and done[0].lost and "hung" in done[0].lost and time.monotonic() - t0 < 30
        assert _pid_gone(pid)
        ex.submit("next", partial(_canned, {"status": "ok", "duration_s": 0.0}, 0.0))
        (d,) = ex.collect(timeout=60)
        assert d.result == {"status": "ok", "duration_s": 0.0}  # a fresh actor took the slot
    finally:
        ex.close()

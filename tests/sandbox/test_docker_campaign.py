"""Acceptance: the quickstart campaign runs with ``sandbox: docker`` (a short budget), measures in
warm containers, records the runner and its fingerprint, and leaves no container behind."""

from __future__ import annotations

import json

import pytest
import yaml

from arbor.search_tree import open_store
from tests.arbor.helpers import SLOW_MOVES, arbor

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_quickstart_runs_in_docker(campaign_dir, docker_engine):
    import docker

    spec = yaml.safe_load((campaign_dir / "quickstart.yaml").read_text())
    spec["name"] = "qs-docker"
    spec["sandbox"].update(kind="docker", memory_gb=4, docker={"image": "host"})
    spec["budget"]["max_evaluations"] = 1  # the baseline, a candidate and its re-measurements
    spec["skills"] = {"exclude": SLOW_MOVES}  # torch.compile: ~20 s a candidate, nothing about the sandbox
    spec["target"].update(sizes={"batch_size": 256, "dim": 512}, num_threads=1)
    spec["measurement"].update(time_budget_s=0.3, warmup_s=0.05, min_sample_s=0.005)
    spec["critic"]["max_cv"] = 10  # a shared 2-core CI box: this test is about the sandbox, not noise
    (campaign_dir / "qs-docker.yaml").write_text(yaml.safe_dump(spec))
    r = arbor("run", "qs-docker.yaml", "--json", cwd=campaign_dir)
    assert r.returncode == 0, r.stderr + r.stdout
    summary = json.loads(r.stdout)
    assert summary["stop_reason"].startswith("budget"), summary
    store = open_store(f"sqlite:///{campaign_dir / 'arbor.db'}")
    try:
        camp = store.get_campaign("qs-docker")
        ms = [m for n in store.nodes(camp.id) for m in store.measurements(n.id)]
        assert len(ms) >= 2 and all(m.runner == "docker" for m in ms)
        ok = [m for m in ms if m.status == "ok"]
        assert ok, [(m.status, m.error_class, m.error_text) for m in ms]
        fp = ok[0].fingerprint
        assert fp["clock_mode"] == "verify" and fp["host"] and fp["cpu_model"]  # the runner's view
        assert fp["host_allocator"] == "glibc:no-mmap,no-trim"  # pinned inside the container too
    finally:
        store.close()
    client = docker.from_env()
    assert client.containers.list(all=True, filters={"label": "arbor.campaign=qs-docker"}) == []

"""A campaign with several workers on a PostgreSQL store (the store a fleet shares).

Uses the ``pg_url`` fixture (a private server started for the test, fresh database per test) where
the test suite provides one, else ``$ARBOR_TEST_PG_URL``; skips with a reason when neither exists.
"""

from __future__ import annotations

import os

import pytest

from arbor.campaign.run import run_campaign
from arbor.search_tree import open_store

from .parallel_helpers import replay_spec


@pytest.fixture
def postgres_url(request) -> str:
    try:
        return request.getfixturevalue("pg_url")
    except pytest.FixtureLookupError:
        url = os.environ.get("ARBOR_TEST_PG_URL")
        if not url:
            pytest.skip("no PostgreSQL server: needs the pg_url fixture or ARBOR_TEST_PG_URL")
        return url


@pytest.mark.slow
def test_three_workers_on_postgres_measure_nothing_twice(tmp_path, postgres_url):
    spec = replay_spec(tmp_path, "pgpar", workers=3, max_evaluations=8)
    spec.store.url = postgres_url
    s = run_campaign(spec, lambda *a: None)
    assert s.stop_reason.startswith("budget: 8 evaluations") and s.verified is not None
    store = open_store(postgres_url)
    try:
        camp = store.get_campaign("pgpar")
        nodes = store.nodes(camp.id)
        assert all(n.state in ("accepted", "rejected", "failed", "pruned") for n in nodes)
        series = [(m.node_id, m.attempt) for m in store.measurements_after(camp.id, 0, limit=10**6, samples=False)]
        assert len(series) == len(set(series))
        primaries = [m.node_id for m in store.measurements_after(camp.id, 0, limit=10**6, samples=False)
                     if m.purpose == "primary"]
        assert len(primaries) == len(set(primaries))
        assert len({n.artifact_sha for n in nodes}) == len(nodes)
    finally:
        store.close()

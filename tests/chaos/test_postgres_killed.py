"""A PostgreSQL server killed mid-run: the run rides it out (retrying the measurement's write) or
stops with one line; after a restart and a resume nothing is lost, duplicated or stuck."""

from __future__ import annotations

import time

import pytest

from tests.pg_server import PgServer, create_database, pg_possible

from .helpers import assert_consistent, finish, one_line_error, query, replay_campaign, run, start

pytestmark = [pytest.mark.chaos, pytest.mark.slow,
              pytest.mark.skipif(not pg_possible(), reason="needs PostgreSQL binaries and psycopg")]


def test_server_killed_mid_run_then_resume(tmp_path):
    server = PgServer()
    try:
        server.start()
        url = create_database(server.admin_url)
        spec = replay_campaign(tmp_path, evaluations=30)
        proc = start("run", str(spec), "--quiet", "--store", url, ARBOR_STORE_RETRY_S="20")
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                if query(url, "select count(*) from measurements")[0][0] >= 3:
                    break
            except Exception:  # noqa: BLE001  schema not there yet
                pass
            time.sleep(0.1)
        server.kill()
        time.sleep(2)
        server.start()
        rc, _out, err = finish(proc, timeout=120)
        assert rc in (0, 2), err
        one_line_error(err)
        if rc == 2:
            assert "store" in err
            r = run("run", str(spec), "--quiet", "--store", url)
            assert r.returncode == 0, r.stderr
            one_line_error(r.stderr)
        assert_consistent(url, evaluations=30)
    finally:
        server.stop()

"""Store faults through the real CLI: one line naming the problem and the fix, never a traceback,
the store file left as it was, and no measurement lost to a full disk."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from arbor.search_tree import open_store
from arbor.search_tree.store import StoreError

from .helpers import assert_consistent, one_line_error, query, replay_campaign, run

pytestmark = pytest.mark.chaos


def _err(r: subprocess.CompletedProcess, *needles: str) -> str:
    assert r.returncode != 0
    one_line_error(r.stderr)
    # a busy machine adds its "note: the machine is busy" line before the run starts: not an error
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("note: ")]
    assert len(lines) == 1, r.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


BAD_URLS = [
    ("garbage", ("is not a database URL", "sqlite:///")),
    ("foo://x/y", ("unknown database kind 'foo'",)),
    ("postgresql+pg8000://u@localhost/db", ("pg8000 driver", "pip install pg8000")),
    ("postgresql+psycopg://u@localhost:abc/db", ("port is not a number",)),
    ("postgresql+psycopg://u@127.0.0.1:1/db", ("cannot open store", "Connection refused")),
]


@pytest.mark.parametrize("url, needles", BAD_URLS)
def test_bad_store_urls_are_one_line(url, needles):
    with pytest.raises(StoreError) as e:
        open_store(url)
    msg = str(e.value)
    assert "\n" not in msg and all(n in msg for n in needles), msg


def test_bad_store_urls_through_the_cli(tmp_path):
    spec = replay_campaign(tmp_path)
    for url, needles in BAD_URLS[1:3]:
        _err(run("run", str(spec), "--store", url), *needles)
        _err(run("query", "select 1", "--store", url), *needles)


def test_missing_postgres_driver_names_the_extra(monkeypatch):
    from arbor.search_tree.sql.errors import open_error

    msg = str(open_error("postgresql+psycopg://u@h/db", ModuleNotFoundError("no", name="psycopg")))
    assert "pip install 'arbor-opt[postgres]'" in msg


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_corrupt_store_is_one_line_and_untouched(tmp_path):
    spec = replay_campaign(tmp_path)
    bad = tmp_path / "arbor.db"
    bad.write_bytes(os.urandom(8192))
    before = _digest(bad)
    _err(run("run", str(spec)), "is corrupt", "file is not a database", "left untouched")
    _err(run("history", str(bad)), "corrupt")
    assert _digest(bad) == before


def test_malformed_store_is_one_line(tmp_path):
    spec = replay_campaign(tmp_path, evaluations=4)
    assert run("run", str(spec), "--quiet").returncode == 0
    db = tmp_path / "arbor.db"
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = bytearray(db.read_bytes())
    data[4096 * 2:4096 * 6] = os.urandom(4096 * 4)  # pages of the tables, header intact
    db.write_bytes(bytes(data))
    for args in (("run", str(spec), "--max-evaluations", "8"), ("history", str(spec))):
        r = run(*args)
        assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
        assert "malformed" in r.stderr or "corrupt" in r.stderr or "not a database" in r.stderr, r.stderr


def test_store_from_a_newer_arbor_says_upgrade_and_is_untouched(tmp_path):
    spec = replay_campaign(tmp_path, evaluations=2)
    assert run("run", str(spec), "--quiet").returncode == 0
    db = tmp_path / "arbor.db"
    con = sqlite3.connect(db)
    con.execute("update alembic_version set version_num = '9999_future'")
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    before = _digest(db)
    _err(run("run", str(spec)), "newer Arbor", "9999_future", "upgrade Arbor")
    _err(run("history", str(spec)), "upgrade Arbor")
    assert _digest(db) == before
    assert query(f"sqlite:///{db}", "select version_num from alembic_version") == [("9999_future",)]


def test_bad_spec_creates_no_store_file(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: bad\ntarget:\n  problem: missing.py\n")
    r = run("run", str(spec))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert not (tmp_path / "arbor.db").exists()
    replay = replay_campaign(tmp_path)
    (tmp_path / "land.json").unlink()
    r = run("run", str(replay))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "arbor.db").exists()


def test_refused_write_in_query_is_a_store_error_on_postgres(pg_url):
    s = open_store(pg_url)
    try:
        s.get_or_create_campaign("c", "kernel", {})
        with pytest.raises(StoreError, match="read-only"):
            s.read_only_query("select id from campaigns for update")
        with pytest.raises(StoreError, match="query failed"):
            s.read_only_query("select nope from campaigns")
        assert s.read_only_query("select count(*) from campaigns")[1] == [(1,)]
    finally:
        s.close()


def _can_mount_tmpfs() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.mark.slow
@pytest.mark.skipif(not _can_mount_tmpfs(), reason="needs root to mount a small tmpfs")
def test_disk_full_mid_run_loses_nothing(tmp_path):
    spec = replay_campaign(tmp_path, evaluations=30)
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(mnt)], check=True)
    try:
        url = f"sqlite:///{mnt / 'arbor.db'}"
        r = run("run", str(spec), "--quiet", "--store", url, ARBOR_STORE_RETRY_S="2")
        assert r.returncode == 2, r.stdout + r.stderr
        _err(r, "disk holding the store is full", "run the same command")
        assert query(url, "select status from campaigns") in ([("interrupted",)], [("running",)])
        subprocess.run(["mount", "-o", "remount,size=32m", str(mnt)], check=True)
        r = run("run", str(spec), "--quiet", "--store", url)
        assert r.returncode == 0, r.stderr
        assert_consistent(url, evaluations=30)
        assert not list((tmp_path / "arbor_runs").rglob("pending_measurements/*.json"))
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)

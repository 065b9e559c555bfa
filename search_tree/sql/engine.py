"""Engines for the SQL store: SQLite pragmas (WAL, busy timeout, foreign keys) for the writer,
and read-only engines that cannot write whatever SQL they are sent (``arbor query``, dashboards)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy.pool import QueuePool

from ..store import StoreError


def make_engine(url: str, read_only: bool = False) -> Engine:
    """The writer's engine, or (``read_only``) one for observers: on SQLite an existing file opened
    ``mode=ro`` with ``query_only``; on PostgreSQL read-only transactions."""
    is_sqlite = url.startswith("sqlite")
    if read_only:
        engine = _read_only_sqlite_engine(url) if is_sqlite else create_engine(url)
        listener = _sqlite_read_only_pragmas if is_sqlite else (
            _postgres_read_only if engine.dialect.name == "postgresql" else None)
    else:
        # a server restarted mid-run leaves dead pooled connections: ping them before use
        kwargs: dict[str, Any] = ({"connect_args": {"timeout": 30, "check_same_thread": False}} if is_sqlite
                                  else {"pool_pre_ping": True})
        engine = create_engine(url, **kwargs)
        listener = _sqlite_pragmas if is_sqlite else None
    if listener is not None:
        event.listen(engine, "connect", listener)
    return engine


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def _sqlite_read_only_pragmas(dbapi_conn, _record) -> None:
    # No journal_mode here: switching it is a write. The writer already put the file in WAL,
    # where readers never block it (and it never blocks them).
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA query_only=ON")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


def _postgres_read_only(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    cur.close()


def _read_only_sqlite_engine(url: str):
    """An engine on an existing SQLite file opened with ``mode=ro``: it can neither create the
    file nor write to it, whatever SQL is sent."""
    database = make_url(url).database
    if not database or database == ":memory:":
        raise StoreError(f"cannot open {url} read-only: name a database file")
    path = Path(database).expanduser().resolve()
    if not path.is_file():
        raise StoreError(f"store not found: {path} — has the campaign started? (`arbor run CAMPAIGN.yaml`)")
    uri = f"file:{quote(str(path))}?mode=ro"

    def connect():
        return sqlite3.connect(uri, uri=True, timeout=5, check_same_thread=False)

    return create_engine("sqlite://", creator=connect, poolclass=QueuePool)

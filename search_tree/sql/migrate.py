"""Apply alembic migrations automatically, on the store's own connection.

Users never run ``alembic upgrade`` by hand: opening a store brings its schema to head (and
does nothing, cheaply, when it already is).
"""

from __future__ import annotations

import time
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

MIGRATIONS = Path(__file__).parent / "migrations"
_RACE_RETRIES = 10


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def head_revision() -> str:
    return ScriptDirectory.from_config(_config()).get_current_head()


def check_readable(engine: Engine) -> str | None:
    """The store's schema revision, refused when a newer Arbor wrote it: neither a reader nor
    the migration may guess at tables it does not know."""
    from ..store import StoreError

    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    known = {r.revision for r in ScriptDirectory.from_config(_config()).walk_revisions()}
    if current is not None and current not in known:  # never "upgrade" what we cannot read
        raise StoreError(f"this store was written by a newer Arbor (schema revision {current}; this "
                         f"Arbor knows up to {head_revision()}) — upgrade Arbor (pip install -U arbor-opt); "
                         "the store was left untouched")
    return current


def upgrade(engine: Engine) -> None:
    head = head_revision()
    if check_readable(engine) == head:
        return
    for attempt in range(_RACE_RETRIES):
        try:
            with engine.begin() as conn:
                cfg = _config()
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
            return
        except Exception:
            # two processes opening a new store at once: the loser's DDL fails; once the winner
            # committed, the schema is at head and there is nothing left to do
            time.sleep(0.1 * (attempt + 1))
            with engine.connect() as conn:
                if MigrationContext.configure(conn).get_current_revision() == head:
                    return
            if attempt == _RACE_RETRIES - 1:
                raise

"""The search tree: the store (contract in ``store``, SQLAlchemy backend in ``sql/``), the
incremental tree index, selection policies and Pareto fronts.

This package imports nothing from the sandbox, the agents or the ``arbor`` top level; what it
needs from them (e.g. whether a lease's pid is alive) is handed in by the caller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .store import Store

__all__ = ["open_store"]


def open_store(url: str, read_only: bool = False) -> "Store":
    """Open (and migrate) the store at a SQLAlchemy URL.

    ``read_only=True`` is for observers of a campaign another process is writing (dashboard,
    report, export): no migration, no file creation, and the database itself refuses writes
    (SQLite ``mode=ro`` + ``query_only``; PostgreSQL read-only transactions). A missing SQLite
    file raises StoreError instead of being created.

    The backend is imported here, on first use, so that reading records or the tree index never
    pulls in SQLAlchemy and alembic."""
    from .sql.store import SqlStore

    return SqlStore(url, read_only=read_only)

"""Store faults as one line naming the problem and the fix.

SQLAlchemy, the drivers and alembic answer a bad URL, a missing driver, a corrupt file or a full
disk with tracebacks of 10-30 KB; a user needs the one fact and what to do about it.
"""

from __future__ import annotations

from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

from ..store import StoreError

DRIVER_EXTRAS = {"psycopg": "postgres"}
EXAMPLES = "sqlite:///path/to/arbor.db or postgresql+psycopg://user@host:5432/arbor"


def shown(url: str) -> str:
    """The URL with any password hidden (it ends up in logs and terminals)."""
    try:
        from sqlalchemy import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def disk_full(exc: BaseException) -> bool:
    text = str(getattr(exc, "orig", None) or exc).lower()
    return "disk is full" in text or "no space left" in text or "disk full" in text


def open_error(url: str, exc: BaseException) -> StoreError:
    where = shown(url)
    if isinstance(exc, NoSuchModuleError):
        dialect = str(exc).rsplit(":", 1)[-1].strip() or "?"
        return StoreError(f"store URL {where}: unknown database kind {dialect!r} — use {EXAMPLES}")
    if isinstance(exc, ArgumentError):
        return StoreError(f"store URL {where!r} is not a database URL — use {EXAMPLES}")
    if isinstance(exc, ImportError):
        name = (exc.name or "the driver").split(".")[0]
        extra = DRIVER_EXTRAS.get(name)
        fix = f"pip install 'arbor-opt[{extra}]'" if extra else f"pip install {name}"
        return StoreError(f"store URL {where} needs the {name} driver, which is not installed — {fix}")
    if isinstance(exc, ValueError) and "int" in str(exc):
        return StoreError(f"store URL {where}: the port is not a number — use host:5432")
    if isinstance(exc, DBAPIError):
        msg = first_line(exc)
        low = msg.lower()
        if "file is not a database" in low or "malformed" in low or "not a database" in low:
            return StoreError(f"store {where} is corrupt ({msg}); it was left untouched — restore it "
                              "from a backup, or move it away to start the campaign afresh")
        if disk_full(exc):
            return StoreError(f"store {where}: the disk is full — free space, then run the same command")
        return StoreError(f"cannot open store {where}: {msg} — check the URL, the server and permissions")
    return StoreError(f"cannot open store {where}: {first_line(exc)}")


def query_error(exc: DBAPIError) -> StoreError:
    msg = first_line(exc)
    name = type(getattr(exc, "orig", None)).__name__
    if name == "ReadOnlySqlTransaction" or "read-only" in msg.lower() or "readonly" in msg.lower():
        return StoreError(f"arbor query is read-only: {msg} — use a SELECT")
    return StoreError(f"query failed: {msg}")


def store_fault(exc: BaseException) -> StoreError | None:
    """A database error that escaped a run (disk full, server gone, file corrupted under us) as
    one line; None for anything that is not a store fault (a bug: let it surface)."""
    from sqlalchemy.exc import SQLAlchemyError

    if not isinstance(exc, SQLAlchemyError):
        return None
    msg = first_line(exc)
    if disk_full(exc):
        return StoreError(f"the disk holding the store is full ({msg}) — free space, then run the "
                          "same command to resume (nothing stored is lost)")
    low = msg.lower()
    if "malformed" in low or "not a database" in low:
        return StoreError(f"the store became corrupt during the run ({msg}) — restore it from a backup")
    if isinstance(exc, DBAPIError) and exc.connection_invalidated or "connection" in low or "server" in low:
        return StoreError(f"lost the connection to the store ({msg}) — restart the database server, "
                          "then run the same command to resume")
    return StoreError(f"store error: {msg} — run the same command to resume once it is fixed")

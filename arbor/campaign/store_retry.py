"""A finished measurement is never lost to a store fault.

A full disk or a database server that went away makes the write of a measurement fail after the
(expensive) measurement itself succeeded. The result is kept in memory and the write retried with
backoff for ``ARBOR_STORE_RETRY_S`` seconds (default 120: enough to free space or restart the
server); if the store is still refusing, it is spilled as JSON beside the campaign's runs and the
run stops with one line. The next ``arbor run`` lands the spilled measurement instead of measuring
the node again.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

from sqlalchemy.exc import DBAPIError

from arbor.search_tree.sql.errors import disk_full, first_line

DEFAULT_RETRY_S = 120.0


def retry_window_s() -> float:
    try:
        return float(os.environ.get("ARBOR_STORE_RETRY_S", DEFAULT_RETRY_S))
    except ValueError:
        return DEFAULT_RETRY_S


def transient(exc: BaseException) -> bool:
    """Faults that go away by themselves or by an operator's hand: full disk, lost server, lock."""
    if not isinstance(exc, DBAPIError):
        return False
    low = first_line(exc).lower()
    return (disk_full(exc) or exc.connection_invalidated or "locked" in low or "connection" in low
            or "server" in low or "terminating" in low or "shutdown" in low)


def retry(write: Callable[[], Any], report: Callable[[str, dict], None], what: str) -> Any:
    """``write()``, retried with backoff while the fault is transient and the window lasts."""
    deadline = time.monotonic() + retry_window_s()
    delay, told = 0.5, False
    while True:
        try:
            return write()
        except DBAPIError as exc:
            if not transient(exc) or time.monotonic() + delay > deadline:
                raise
            if not told:
                report("store_retry", {"what": what, "error": first_line(exc)})
                told = True
            time.sleep(delay)
            delay = min(delay * 2, 10.0)


def _spill_dir(runs_dir: Path) -> Path:
    return runs_dir / "pending_measurements"


def spill(runs_dir: Path, node_id: int, attempt: int, purpose: str, result: dict, runner: str) -> bool:
    """Keep a measurement the store refused, for the next run to land (False: could not)."""
    path = _spill_dir(runs_dir) / f"{node_id}-{attempt}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"node": node_id, "attempt": attempt, "purpose": purpose,
                                   "result": result, "runner": runner}, default=str))
        os.replace(tmp, path)
        return True
    except OSError:
        return False


def take_spilled(runs_dir: Path, node_id: int, attempt: int) -> dict | None:
    """The spilled measurement of (node, attempt), if an earlier run left one."""
    path = _spill_dir(runs_dir) / f"{node_id}-{attempt}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def drop_spilled(runs_dir: Path, node_id: int, attempt: int) -> None:
    try:
        (_spill_dir(runs_dir) / f"{node_id}-{attempt}.json").unlink()
    except OSError:
        pass

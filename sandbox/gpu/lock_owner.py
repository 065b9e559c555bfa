"""Who holds a clock lock: the process behind a ``clocks_locked`` record in the store.

A campaign that crashed leaves its record behind; the next one to start undoes that lock unless
the owner still runs. Kept apart from the guard (``clocks.py``) because it reads only ``/proc``
and the record, never a GPU: a pid with its start time names one process, where a pid alone may
have been reused after the owner died.
"""

from __future__ import annotations

import os

from ..runners.proctree import pid_alive

__all__ = ["owner_alive", "start_ticks"]


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot: with the pid, it names one process
    (a pid alone may be reused after the owner died)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def owner_alive(record: dict) -> bool:
    """Whether the process that wrote a ``clocks_locked`` record still runs (on this host)."""
    pid = record.get("pid")
    if not isinstance(pid, int) or pid == os.getpid() or not pid_alive(pid):
        return False
    started = record.get("pid_start")
    return started is None or start_ticks(pid) in (None, started)

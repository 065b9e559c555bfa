"""What keeps one ``arbor run`` the only writer of its campaign, and makes it stop cleanly.

* the campaign lease (taken in ``build_context``) is beaten by a background thread, which also
  persists wall time, so a run killed mid-measurement still counts the time it spent;
* SIGTERM and SIGHUP (what systemd, Slurm, ``kill`` and a closed terminal send) take the Ctrl-C
  path: the main thread gets a KeyboardInterrupt, the job tree is killed, the node goes back to
  the queue, the status says ``interrupted`` and the clocks are restored.
"""

from __future__ import annotations

import os
import signal
import threading
import uuid
from contextlib import contextmanager
from typing import Iterator

STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


def new_owner() -> str:
    return f"{os.getpid()}-{uuid.uuid4().hex[:12]}"


class Heartbeat:
    """Beats the campaign lease (and the owner's node leases) and flushes elapsed time."""

    def __init__(self, ctx, every_s: float) -> None:  # type: ignore[no-untyped-def]
        self.ctx, self.every_s = ctx, every_s
        self.lost = False  # the lease went to another run while we stalled
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="arbor-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                if not self.ctx.store.campaign_heartbeat(self.ctx.cid, self.ctx.owner):
                    self.lost = self.ctx.lease_lost = True
                self.ctx.flush_elapsed()
            except Exception:  # a missed beat only makes the lease look stale sooner
                pass


@contextmanager
def signals_interrupt(seen: list[int] | None = None) -> Iterator[list[int]]:
    """Within the block, SIGTERM/SIGHUP raise KeyboardInterrupt in the main thread (as Ctrl-C).
    Yields the list (``seen``, if given: the caller holds it before a signal can land) that
    receives the signal numbers seen (for the message)."""
    seen = [] if seen is None else seen
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def handler(signum, _frame):  # type: ignore[no-untyped-def]
        seen.append(signum)
        if len(seen) == 1:
            raise KeyboardInterrupt(signal.Signals(signum).name)

    old = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield seen
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def forget_caught_interrupt() -> None:
    """Let the exit status be the one the command chose, after an interruption it handled.

    CPython (3.11) marks a KeyboardInterrupt that escapes code run by ``exec`` of a *string* as
    "unhandled" in a process-wide flag, and ``python -m`` then ends the process by SIGINT whatever
    the code (``sys.exit(143)`` became "killed by SIGINT", rc -2). A SIGTERM landing while
    ``dataclasses`` builds an ``__init__`` (``exec`` of generated source, during an import) does
    exactly that — seen in the chaos suite. Every string evaluation clears the flag first, so one
    trivial evaluation forgets it; an interrupt that really escapes ``main`` sets it again."""
    exec("None")  # noqa: S102  a constant: the side effect (clearing the flag) is the point


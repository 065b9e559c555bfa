"""What keeps one ``arbor run`` the only writer of its campaign, and makes it stop cleanly.

* the campaign lease (taken in ``build_context``) is beaten by a background thread, which also
  persists wall time, so a run killed mid-measurement still counts the time it spent;
* SIGTERM and SIGHUP (what systemd, Slurm, ``kill`` and a closed terminal send) take the Ctrl-C
  path: the main thread gets a KeyboardInterrupt, the job tree is killed, the node goes back to
  the queue, the status says ``interrupted`` and the clocks are restored. A signal the process was
  started with *ignored* stays ignored: ``nohup arbor run ...`` asks the run to outlive its
  terminal (SIGHUP), as ``... &`` in a non-interactive shell asks it to outlive Ctrl-C;
* none of them interrupts an import: a KeyboardInterrupt raised while a module initialises leaves
  it half-imported in the process, and the clean-up that follows imports it again (torch, numpy:
  that raises or segfaults — seen in the chaos suite as a SIGTERM ending with SIGSEGV once imports
  moved from start-up into the run). Nor a call into SQLAlchemy: one that landed in a commit,
  between the database's COMMIT and the connection's own bookkeeping, made SQLAlchemy's clean-up
  fail an internal assertion, and the run ended with that traceback instead of a clean stop (seen
  in the chaos suite's SIGTERM points). A signal that lands in either is delivered again a moment
  later, until it lands outside; store calls take milliseconds, so one still inside the store
  after ``STORE_DEFER_S`` is hung (a database server gone quiet) and the stop lands anyway.
"""

from __future__ import annotations

import os
import signal
import threading
import time
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


REDELIVER_S = 0.02


# libraries whose state an exception raised at an arbitrary bytecode can corrupt (see above)
UNINTERRUPTIBLE_MODULES = ("sqlalchemy.",)


STORE_DEFER_S = 5.0  # a stop waits this long at most for a store call to return


def uninterruptible(frame) -> str | None:  # type: ignore[no-untyped-def]
    """``"import"`` or ``"store"`` when ``frame`` (the main thread's, as a signal handler receives
    it) runs inside an import or inside SQLAlchemy, where a KeyboardInterrupt must not land."""
    where = None
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return "import"  # never cut, however long: a half-imported module is worse than a wait
        if where is None and str(frame.f_globals.get("__name__") or "").startswith(UNINTERRUPTIBLE_MODULES):
            where = "store"
        frame = frame.f_back
    return where


def _redeliver(signum: int) -> None:
    t = threading.Timer(REDELIVER_S, os.kill, (os.getpid(), signum))
    t.daemon = True
    t.start()


@contextmanager
def signals_interrupt(seen: list[int] | None = None) -> Iterator[list[int]]:
    """Within the block, SIGTERM/SIGHUP raise KeyboardInterrupt in the main thread (as Ctrl-C),
    and none of them — Ctrl-C included, unless the process was started with it ignored — cuts an
    import or a store call in half (it is delivered again once that is done). Yields the list (``seen``, if
    given: the caller holds it before a signal can land) that receives the stop signals seen (for
    the message and the exit code; Ctrl-C is the default 130)."""
    seen = [] if seen is None else seen
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    deferred: dict[int, float] = {}  # signal -> when it first landed inside the store

    def handler(signum, frame):  # type: ignore[no-untyped-def]
        where = uninterruptible(frame)
        if where == "import" or (where == "store" and time.monotonic() - deferred.setdefault(
                signum, time.monotonic()) < STORE_DEFER_S):
            _redeliver(signum)
            return
        deferred.pop(signum, None)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        seen.append(signum)
        if len(seen) == 1:
            raise KeyboardInterrupt(signal.Signals(signum).name)

    caught = tuple(s for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN)  # nohup: SIGHUP stays off
    caught += (signal.SIGINT,) if signal.getsignal(signal.SIGINT) is signal.default_int_handler else ()
    old = {s: signal.signal(s, handler) for s in caught}
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


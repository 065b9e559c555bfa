"""What libraries log reaches the terminal as one line, never as a traceback.

SQLAlchemy's pool catches an exception raised while it closes a connection, logs it with its
traceback through Python's last-resort handler, and re-raises it. When that exception is the
KeyboardInterrupt a Ctrl-C or SIGTERM raises (seen in the chaos suite: a SIGTERM landing inside
``dbapi_connection.close()``), the run stops cleanly but stderr carried a traceback. The stop itself
is reported by ``arbor run``; the library's record of it is noise and is dropped. Other library
warnings and errors stay visible, as one line each (``ARBOR_DEBUG=1`` restores the traceback).
"""

from __future__ import annotations

import logging
import os
import sys

_INSTALLED = "_arbor_one_line"


class _OneLine(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            return  # the interruption is reported by the command that was interrupted
        try:
            line = f"warning: {record.name}: {record.getMessage()}"
            if exc is not None:
                line += f" ({type(exc).__name__}: {exc})"
            line = " ".join(line.split("\n"))
            if exc is not None and os.environ.get("ARBOR_DEBUG"):
                line += "\n" + logging.Formatter().formatException(record.exc_info)  # type: ignore[arg-type]
            print(line, file=sys.stderr)
        except Exception:  # a log line must never become the failure
            pass


def _unraisable(u) -> None:  # type: ignore[no-untyped-def]
    """An exception Python cannot raise (in ``__del__``, a weakref or GC callback) — a Ctrl-C or
    SIGTERM landing there included — is reported as one line, or not at all when it is the
    interruption the command itself reports."""
    if isinstance(u.exc_value, (KeyboardInterrupt, SystemExit)):
        return
    if os.environ.get("ARBOR_DEBUG"):
        sys.__unraisablehook__(u)
        return
    text = " ".join(f"{type(u.exc_value).__name__}: {u.exc_value}".split())
    print(f"warning: ignored {text[:300]}", file=sys.stderr)


def one_line_unraisable() -> None:
    """Exceptions Python cannot raise as one line (installed by the console script only, so an
    embedding process, a test runner included, keeps its own hook)."""
    sys.unraisablehook = _unraisable


def one_line_library_logs() -> None:
    """Route WARNING and above from every library logger through one-line output (idempotent)."""
    root = logging.getLogger()
    if any(getattr(h, _INSTALLED, False) for h in root.handlers):
        return
    handler = _OneLine(logging.WARNING)
    setattr(handler, _INSTALLED, True)
    root.addHandler(handler)

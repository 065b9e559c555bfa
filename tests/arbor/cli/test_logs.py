"""Library log records reach the terminal as one line; an interruption's record not at all."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent("""
    import sqlite3, sys
    from sqlalchemy import create_engine, text
    from arbor.cli.logs import one_line_library_logs
    one_line_library_logs()
    engine = create_engine("sqlite://")
    with engine.connect() as c:
        c.execute(text("select 1"))
    def interrupted_close(conn):  # what a SIGTERM landing inside close() looks like to the pool
        raise {exc}("SIGTERM")
    engine.dialect.do_close = interrupted_close
    try:
        engine.dispose()
    except BaseException as e:
        print("raised", type(e).__name__)
""")


def _run(exc: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROGRAM.format(exc=exc)], capture_output=True,
                          text=True, timeout=60)


def test_an_interrupt_inside_a_library_prints_no_traceback_and_still_stops():
    done = _run("KeyboardInterrupt")
    assert "raised KeyboardInterrupt" in done.stdout  # the library re-raises: the run still stops
    assert "Traceback" not in done.stderr and "Exception closing" not in done.stderr, done.stderr


def test_a_library_error_is_one_warning_line():
    done = _run("OSError")
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("warning: sqlalchemy.pool") and "OSError: SIGTERM" in lines[0]


def test_without_the_handler_the_library_prints_a_traceback():
    """The control: what the chaos suite saw before the handler was installed."""
    program = PROGRAM.replace("one_line_library_logs()\n", "")
    done = subprocess.run([sys.executable, "-c", program.format(exc="KeyboardInterrupt")],
                          capture_output=True, text=True, timeout=60)
    assert "Traceback" in done.stderr


def test_an_interrupt_python_cannot_raise_prints_no_traceback():
    """A SIGTERM landing in a ``__del__`` reaches sys.unraisablehook, which prints a traceback by
    default; other unraisable errors are one line."""
    program = textwrap.dedent("""
        import gc
        from arbor.cli.logs import one_line_unraisable
        one_line_unraisable()
        class Dying:
            def __init__(self, exc):
                self.exc = exc
            def __del__(self):
                raise self.exc("SIGTERM")
        Dying(KeyboardInterrupt)
        Dying(OSError)
        gc.collect()
        print("alive")
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "alive"
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr
    assert done.stderr.strip() == "warning: ignored OSError: SIGTERM", done.stderr

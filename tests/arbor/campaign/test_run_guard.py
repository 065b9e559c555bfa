"""A stop signal never cuts an import in half: a module interrupted while it initialises stays
half-imported in the process, and importing it again in the clean-up raised or segfaulted (the
chaos suite's SIGTERM ended in SIGSEGV once imports moved from start-up into the run)."""

from __future__ import annotations

import signal
import sys
import time

import pytest

from arbor.campaign.run_guard import signals_interrupt

MODULE = """import os, signal, time
os.kill(os.getpid(), signal.{sig})  # lands while this module initialises
for _ in range(20):
    time.sleep(0.01)
DONE = True
"""


@pytest.fixture
def ctrl_c():
    """Ctrl-C as an interactive shell hands it down (a suite started from a background shell
    inherits it ignored, and then the guard rightly leaves it ignored)."""
    prev = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, prev)


@pytest.mark.parametrize("sig, args", [("SIGTERM", ("SIGTERM",)), ("SIGINT", ())])
def test_a_signal_during_an_import_is_delivered_once_the_import_is_done(tmp_path, monkeypatch, ctrl_c, sig, args):
    name = f"arbor_test_slow_import_{sig.lower()}"
    (tmp_path / f"{name}.py").write_text(MODULE.format(sig=sig))
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[int] = []
    with pytest.raises(KeyboardInterrupt) as stop:
        with signals_interrupt(seen):
            __import__(name)
            time.sleep(5)  # the interrupt lands here, a moment after the import
    assert sys.modules[name].DONE  # the module finished initialising
    assert stop.value.args == args and seen == ([signal.SIGTERM] if sig == "SIGTERM" else [])
    sys.modules.pop(name)


def test_outside_an_import_a_stop_signal_interrupts_at_once():
    import os

    seen: list[int] = []
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with signals_interrupt(seen):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    assert time.monotonic() - t0 < 1 and seen == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL or callable(signal.getsignal(signal.SIGTERM))


def test_a_signal_inside_a_store_commit_lands_after_it(tmp_path):
    """Seen in the chaos suite: a SIGTERM that landed inside SQLAlchemy's commit made its clean-up
    fail an internal assertion, and the run ended with a traceback instead of a clean stop. The
    signal now waits until the call has returned: the row is committed, then the run stops."""
    import os

    from sqlalchemy import create_engine, event, text

    eng = create_engine(f"sqlite:///{tmp_path / 't.db'}")
    with eng.begin() as c:
        c.execute(text("create table t (x int)"))

    def on_commit(conn):  # type: ignore[no-untyped-def]  # called from inside SQLAlchemy's commit
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(20):
            time.sleep(0.01)

    event.listen(eng, "commit", on_commit)
    seen: list[int] = []
    try:
        with pytest.raises(KeyboardInterrupt) as stop:
            with signals_interrupt(seen):
                with eng.begin() as c:
                    c.execute(text("insert into t values (1)"))
                time.sleep(5)  # the interrupt lands here, once the commit is done
    finally:
        event.remove(eng, "commit", on_commit)
    assert stop.value.args == ("SIGTERM",) and seen == [signal.SIGTERM]
    with eng.connect() as c:
        assert c.execute(text("select x from t")).all() == [(1,)]
    eng.dispose()


def test_a_store_call_that_hangs_does_not_hold_a_stop_for_ever(tmp_path, monkeypatch):
    """A store call that has not returned within STORE_DEFER_S is hung (a database server gone
    quiet): the stop lands anyway instead of waiting for it."""
    import os

    from sqlalchemy import create_engine, event, text

    from arbor.campaign import run_guard

    monkeypatch.setattr(run_guard, "STORE_DEFER_S", 0.2)
    eng = create_engine(f"sqlite:///{tmp_path / 'h.db'}")
    with eng.begin() as c:
        c.execute(text("create table t (x int)"))

    def hung(conn):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(300):  # 3 s inside SQLAlchemy's commit
            time.sleep(0.01)

    event.listen(eng, "commit", hung)
    t0 = time.monotonic()
    try:
        with pytest.raises(BaseException):
            with signals_interrupt([]):
                with eng.begin() as c:
                    c.execute(text("insert into t values (1)"))
                time.sleep(5)
    finally:
        event.remove(eng, "commit", hung)
        eng.dispose()
    assert time.monotonic() - t0 < 1.5  # not the 3 s the call would have taken

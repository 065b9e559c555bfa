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

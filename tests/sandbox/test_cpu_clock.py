"""Which clock a CPU measurement is reported on, and when process-wide CPU time may not be used.

Single-threaded CPU work is timed on the timing thread's CPU clock, which other processes' load
does not inflate; a candidate on several threads, one whose other threads work, or one that waits
(wall/CPU stretch above the reference's) is reported on wall time, never flattered."""

from __future__ import annotations

import time

import pytest

from arbor.sandbox.harness import timing
from tests.sandbox.kernel.test_protocol import GOOD, measure


def _timer(walls, cpus) -> timing.CpuTimer:
    t = timing.CpuTimer()
    t.start("cpu")
    for side in (0, 1):
        t.walls[side].extend(walls[side])
        t.cpus[side].extend(cpus[side])
    return t


@pytest.mark.timing
def test_single_threaded_work_is_timed_on_cpu_time_and_both_clocks_agree_when_idle():
    m = measure(GOOD)
    assert m.status == "ok", m.error_text
    assert m.stats["clock"] == "cpu" and m.stats["other_threads_share"] < 0.05
    assert all(0.5 < s < 2.0 for s in m.stats["stretch"])  # wall ~ CPU for work that never waits


def test_wall_clock_when_asked_or_when_more_than_one_thread():
    assert measure(GOOD, clock="wall").stats["clock"] == "wall"
    assert measure(GOOD, num_threads=2).stats["clock"] == "wall"
    threaded = "import torch\ntorch.set_num_threads(2)\n" + GOOD
    assert threaded != GOOD
    m = measure(threaded)
    assert m.status == "ok", m.error_text
    assert m.stats["clock"] == "wall"  # the candidate's own thread count rules CPU time out


def test_a_candidate_that_waits_is_reported_on_wall_time():
    walls = ([1.0] * 10, [1.0] * 10)
    cpus = ([1.0] * 10, [0.2] * 10)  # the candidate's time is mostly waiting: CPU would say 5x
    samples = ([1.0] * 10, [0.2] * 10)
    facts: dict = {}
    t = _timer(walls, cpus)
    t.t0 = (timing.cpu_ns() - 10**9, timing.proc_ns() - 10**9)  # 1 s of its own work, none elsewhere
    timing.cpu_or_wall(t, samples, facts)
    assert facts["clock"] == "wall" and "waits" in facts["clock_note"]
    assert samples == ([1.0] * 10, [1.0] * 10)


def test_under_load_both_sides_stretch_alike_and_cpu_time_is_kept():
    walls = ([1.5, 1.0, 2.0] * 4, [0.75, 1.0, 0.5] * 4)
    cpus = ([1.0] * 12, [0.5] * 12)
    samples = ([1.0] * 12, [0.5] * 12)
    facts = {"clock": "cpu"}
    t = _timer(walls, cpus)
    t.t0 = (timing.cpu_ns() - 10**9, timing.proc_ns() - 10**9)  # 1 s of its own work, none elsewhere
    timing.cpu_or_wall(t, samples, facts)
    assert facts["clock"] == "cpu" and samples == ([1.0] * 12, [0.5] * 12)


def test_other_threads_working_during_timing_fall_back_to_wall():
    import threading

    t = _timer(([1.0] * 5, [1.0] * 5), ([1.0] * 5, [1.0] * 5))
    t.t0 = (timing.cpu_ns(), timing.proc_ns())
    stop = time.perf_counter() + 0.3
    spin = threading.Thread(target=lambda: [None for _ in iter(lambda: time.perf_counter() > stop, True)])
    spin.start()
    end = time.perf_counter() + 0.1
    while time.perf_counter() < end:  # this thread works too, a third of the spinner's time
        pass
    spin.join()
    facts: dict = {"clock": "cpu"}
    samples = ([0.5] * 5, [0.5] * 5)
    timing.cpu_or_wall(t, samples, facts)
    assert facts["clock"] == "wall" and "other threads" in facts["clock_note"]
    assert samples == ([1.0] * 5, [1.0] * 5)

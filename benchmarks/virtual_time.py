"""Replayed campaigns on a virtual clock: measurement durations are simulated, not slept.

A replayed measurement returns at once with its recorded duration (``duration_s``, about 6 s on
the CPU landscapes). Instead of sleeping it on a worker thread, the campaign runs against a
clock that jumps forward to the moment a measurement would have ended, and otherwise runs at
real speed: the orchestrator's own work (selecting, proposing, judging, the store) takes the
time it really takes. So ``wall-clock time to target`` at 1, 2, 4, 8 workers is the time a live
fleet would wait, measured in seconds of this process instead of minutes of sleeping.

* ``VirtualExecutor`` — the executor contract (``sandbox/executors/base.py``) with ``workers``
  slots: ``submit`` runs the replayed task at once and files its end at now + its duration;
  ``collect`` moves the clock to the earliest end and hands that task back.
* the serial loop measures in the orchestrator's thread: ``serial_measurements`` makes the
  replay target's simulated duration advance the clock instead of sleeping.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import time
from typing import Hashable, Iterator

from arbor.sandbox.executors import Done, Executor, Task


class VirtualClock:
    """Seconds since the start: real time while this process works, jumps while it waits."""

    def __init__(self) -> None:
        self.base = 0.0
        self.mark = time.monotonic()

    def now(self) -> float:
        return self.base + (time.monotonic() - self.mark)

    def jump_to(self, t: float) -> None:
        """Move to ``t`` (never backwards: a measurement that ended while the orchestrator was
        busy is simply collected late, as a real one would be)."""
        self.base = max(self.now(), t)
        self.mark = time.monotonic()

    def advance(self, seconds: float) -> None:
        self.jump_to(self.now() + max(0.0, seconds))


class VirtualExecutor(Executor):
    kind = "virtual"

    def __init__(self, workers: int, clock: VirtualClock):
        super().__init__(workers)
        self.clock = clock
        self._ends: list[tuple[float, int, Hashable, str, dict | None, BaseException | None, float]] = []
        self._seq = itertools.count()
        self._busy: dict[Hashable, str] = {}
        self.busy_s = 0.0  # simulated measurement seconds, summed over workers

    def _submit(self, key: Hashable, task: Task, meta: dict) -> str:
        taken = set(self._busy.values())
        worker = next(f"virtual slot {i}" for i in range(self.workers) if f"virtual slot {i}" not in taken)
        start = self.clock.now()
        result, error = None, None
        try:
            result = task(None)  # a replayed task needs no runner; it returns at once
        except BaseException as exc:  # noqa: BLE001 - handed back through collect, like a real slot
            error = exc
        duration = float((result or {}).get("duration_s") or 0.0)
        self.busy_s += duration
        heapq.heappush(self._ends, (start + duration, next(self._seq), key, worker, result, error, duration))
        self._busy[key] = worker
        return worker

    def _collect(self, timeout: float | None) -> list[Done]:
        if not self._ends:
            return []
        end = self._ends[0][0]
        self.clock.jump_to(end)
        out = []
        while self._ends and self._ends[0][0] <= self.clock.now():
            _, _, key, worker, result, error, duration = heapq.heappop(self._ends)
            self._busy.pop(key, None)
            out.append(Done(key, worker, result=result, exception=error, duration_s=duration))
        return out

    def close(self, wait: bool = True) -> None:
        self._ends.clear()
        self._busy.clear()

    def describe(self) -> str:
        return f"virtual executor: {self.workers} simulated workers"


@contextlib.contextmanager
def virtual_campaigns(clock: VirtualClock, workers: int) -> Iterator[None]:
    """While open, a campaign with ``workers`` > 1 measures on a ``VirtualExecutor`` and the serial
    loop's replayed measurements advance ``clock`` by their recorded duration (set the replay's
    ``time_scale`` to 0, so nothing sleeps)."""
    import arbor.campaign.parallel as parallel
    import arbor.targets.replay as replay

    saved = parallel.open_executor, replay.simulate_duration

    def open_virtual(ctx):  # type: ignore[no-untyped-def]
        return VirtualExecutor(ctx.spec.executor.workers, clock) if ctx.spec.executor.parallel else None

    def advance(result: dict, time_scale: float) -> None:
        if workers == 1:  # the serial loop measures in this thread: its measurement is the wait
            clock.advance(float(result.get("duration_s") or 0.0))

    parallel.open_executor, replay.simulate_duration = open_virtual, advance
    try:
        yield
    finally:
        parallel.open_executor, replay.simulate_duration = saved

"""Local measurement slots: one thread per slot, each pinned to its own device, each with its own
runner. A slot thread only waits on its job (the measurement is a sandboxed child process), so the
orchestrating process keeps selecting and proposing while every slot measures.

Pinning is per thread (Linux CPU affinity belongs to a thread), and a job's processes inherit the
affinity of the thread that started them — so a slot's candidate never runs on another slot's
cores. A GPU slot adds ``CUDA_VISIBLE_DEVICES`` to its jobs' environment instead.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import replace
from typing import Callable, Hashable

from arbor.sandbox.runner import Job, JobResult, Runner

from .base import Done, Executor, ExecutorError, Task
from .slots import SlotDevice, pin_current_thread

RunnerFactory = Callable[[SlotDevice], Runner]


class SlotRunner(Runner):
    """The slot's view of a runner: every job gets the slot's environment (its GPU)."""

    def __init__(self, inner: Runner, slot: SlotDevice):
        super().__init__()
        self.inner, self.slot = inner, slot
        self.name = inner.name
        self.notices = inner.notices

    def run(self, job: Job) -> JobResult:
        if self.slot.env:
            job = replace(job, env={**job.env, **self.slot.env})
        return self.inner.run(job)

    def _execute(self, job: Job) -> JobResult:  # pragma: no cover - run() delegates
        return self.inner.run(job)

    def prewarm(self, job: Job) -> bool:
        if self.slot.env:
            job = replace(job, env={**job.env, **self.slot.env})
        return self.inner.prewarm(job)

    def close(self) -> None:
        self.inner.close()


class _Slot:
    def __init__(self, device: SlotDevice, factory: RunnerFactory, results: queue.Queue):
        self.device = device
        self.name = device.describe()
        self.inbox: queue.Queue = queue.Queue(maxsize=1)
        self.results = results
        self.runner: Runner | None = None
        self.error: BaseException | None = None
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._loop, args=(factory,), name=f"arbor-{self.name}", daemon=True)
        self.thread.start()

    def _loop(self, factory: RunnerFactory) -> None:
        try:
            pin_current_thread(self.device)
            self.runner = SlotRunner(factory(self.device), self.device)
        except BaseException as exc:  # reported by the executor's constructor
            self.error = exc
            self.ready.set()
            return
        self.ready.set()
        while True:
            item = self.inbox.get()
            if item is None:
                break
            key, task = item
            t0 = time.monotonic()
            try:
                self.results.put(Done(key, self.name, result=task(self.runner), duration_s=time.monotonic() - t0))
            except BaseException as exc:  # the sandbox failed (engine down, clocks refused): caller raises it
                self.results.put(Done(key, self.name, exception=exc, duration_s=time.monotonic() - t0))
        self.runner.close()


class LocalExecutor(Executor):
    kind = "local"

    def __init__(self, devices: list[SlotDevice], runner_factory: RunnerFactory):
        super().__init__(len(devices))
        self._results: queue.Queue = queue.Queue()
        self._slots = [_Slot(d, runner_factory, self._results) for d in devices]
        self._busy: dict[Hashable, _Slot] = {}
        self._closed = False
        for s in self._slots:
            s.ready.wait()
        failed = next((s.error for s in self._slots if s.error is not None), None)
        if failed is not None:
            self.close()
            raise failed

    def _submit(self, key: Hashable, task: Task, meta: dict) -> str:
        busy = set(map(id, self._busy.values()))
        slot = next((s for s in self._slots if id(s) not in busy), None)
        if slot is None:  # pragma: no cover - guarded by free_slots()
            raise ExecutorError("no free slot")
        self._busy[key] = slot
        slot.inbox.put((key, task))
        return slot.name

    def _collect(self, timeout: float | None) -> list[Done]:
        try:
            out = [self._results.get(timeout=timeout)]
        except queue.Empty:
            return []
        while True:
            try:
                out.append(self._results.get_nowait())
            except queue.Empty:
                break
        for d in out:
            self._busy.pop(d.key, None)
        return out

    def close(self, wait: bool = True) -> None:
        """Stop the slots after their current job (a job always ends: the sandbox's time limit).
        Not waiting is for a process on its way out: slot threads are daemons, and a job's
        processes die with the thread that started them (PR_SET_PDEATHSIG)."""
        if self._closed:
            return
        self._closed = True
        for s in self._slots:
            if s.thread.is_alive():
                s.inbox.put(None)
        if wait:
            for s in self._slots:
                s.thread.join()

    def describe(self) -> str:
        return f"local executor: {'; '.join(s.name for s in self._slots)}"

"""The executor contract: keep several measurements in flight and hand back each one as it ends.

An executor knows nothing of the search tree or the store: it runs *tasks* — picklable callables
``task(runner) -> dict`` that measure one candidate with the runner of the worker they landed on —
and reports each outcome once. The orchestrating process stays the only writer of verdicts; a
worker only ever returns data.

A worker that disappears mid-task (its actor, process or node died, or it was killed for hanging)
is reported as ``lost``: the task produced nothing, so the caller can queue it again without
anything having been recorded twice.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, Hashable

from arbor.sandbox.runner import Runner, SandboxError

Task = Callable[[Runner], dict]


@dataclass
class Done:
    """One finished task: exactly one of ``result`` (the measurement), ``lost`` (the worker died,
    nothing was produced) or ``exception`` (the sandbox itself failed, e.g. the engine is down)."""

    key: Hashable
    worker: str
    result: dict | None = None
    lost: str | None = None  # why the worker is gone
    exception: BaseException | None = None
    duration_s: float = 0.0
    meta: dict = field(default_factory=dict)


class ExecutorError(SandboxError):
    """An executor cannot start or run (one line: what failed and the fix)."""


class Executor(ABC):
    """``workers`` slots; ``submit`` needs a free one, ``collect`` waits for outcomes."""

    kind: str = "abstract"

    def __init__(self, workers: int):
        if workers < 1:
            raise ExecutorError(f"workers must be at least 1, not {workers}")
        self.workers = workers
        self._in_flight: dict[Hashable, str] = {}  # key -> worker name

    def in_flight(self) -> dict[Hashable, str]:
        return dict(self._in_flight)

    def free_slots(self) -> int:
        return self.workers - len(self._in_flight)

    def submit(self, key: Hashable, task: Task, meta: dict | None = None) -> str:
        """Start ``task`` on a free worker; returns the worker's name."""
        if key in self._in_flight:
            raise ExecutorError(f"task {key!r} is already in flight on {self._in_flight[key]}")
        if self.free_slots() <= 0:
            raise ExecutorError(f"all {self.workers} workers are busy: collect() before submitting")
        worker = self._submit(key, task, dict(meta or {}))
        self._in_flight[key] = worker
        return worker

    def collect(self, timeout: float | None = None) -> list[Done]:
        """Wait until at least one task ends (or ``timeout`` seconds), then return every task
        that has ended by now. Returns [] when nothing is in flight or on timeout."""
        if not self._in_flight:
            return []
        done = self._collect(timeout)
        for d in done:
            self._in_flight.pop(d.key, None)
        return done

    def map(self, keyed_tasks: list[tuple[Hashable, Task]]) -> list[Done]:
        """Run tasks to completion using every worker (final verification uses this)."""
        todo, out = list(keyed_tasks), []
        while todo or self._in_flight:
            while todo and self.free_slots() > 0:
                key, task = todo.pop(0)
                self.submit(key, task)
            out.extend(self.collect())
        return out

    @abstractmethod
    def _submit(self, key: Hashable, task: Task, meta: dict) -> str: ...

    @abstractmethod
    def _collect(self, timeout: float | None) -> list[Done]: ...

    @abstractmethod
    def close(self, wait: bool = True) -> None:
        """Stop every worker and release what it holds (runners, actors). Idempotent. With
        ``wait=False`` (the user interrupted) jobs in flight are abandoned, not waited for."""

    def describe(self) -> str:
        return f"{self.kind} executor, {self.workers} workers"

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

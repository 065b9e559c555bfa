"""A runner's warm workers (``forkserver.ForkServer``), kept, reused and replaced.

Kept apart from the one-worker protocol in ``forkserver.py``: this is the policy over workers —
at most two, the most recently used kept, one started lazily when a job of its kind first comes,
a script loaded into it the first time one of its jobs comes, a worker that died or stopped
answering replaced, and a script or extra that could not be warmed never asked for again (its jobs
run as fresh processes; the reason is kept for the runner's notice).

docs/architecture.md#sandboxes
"""

from __future__ import annotations

import time

from .forkserver import ExtraFailed, ForkServer, WorkerError, entry_id, worker_key
from ..runner import Job

__all__ = ["WarmPool"]


class WarmPool:
    """A runner's warm workers. ``get`` returns a worker with the job's script loaded, or None (run
    the job afresh); a script that could not be warmed is not tried again, and its reason is kept
    in ``refused`` for the runner's notice."""

    max_workers = 2

    def __init__(self, base_tmp: str | None = None) -> None:
        self.base_tmp = base_tmp
        self.workers: list[tuple[tuple, ForkServer]] = []  # (worker key, server), most recently used last
        self.refused: dict[tuple, str] = {}  # (worker key, entry id) -> why
        self.refused_extras: dict[tuple, str] = {}  # (worker key, entry id, extra) -> why
        self.last_warm_s = 0.0  # what the last ``get`` waited for (a start, a script's warm-up)
        self.last_extras: dict[str, float] = {}  # the extras the last ``get`` ran -> their seconds

    def _find(self, job: Job, key: tuple) -> ForkServer | None:
        for i, (k, server) in enumerate(self.workers):
            if k == key and server.fits(job):
                if not server.alive():  # died (or was killed) since its last job: replace it
                    self._drop(i)
                    return None
                self.workers.append(self.workers.pop(i))
                return server
        return None

    def _new(self, job: Job, key: tuple) -> ForkServer:
        while len(self.workers) >= self.max_workers:
            self._drop(0)
        server = ForkServer(job, self.base_tmp)
        self.workers.append((key, server))
        return server

    def get(self, job: Job) -> ForkServer | None:
        t0 = time.monotonic()
        self.last_warm_s, self.last_extras = 0.0, {}
        key = worker_key(job)
        if key is None or (key, entry_id(job)) in self.refused:
            return None
        server = self._find(job, key) or self._new(job, key)
        try:
            server.load(job)
            return server if self._extras(job, key, server) else None
        except (WorkerError, OSError) as exc:
            self.refused[(key, entry_id(job))] = str(exc)
            if not server.alive():
                self.drop(server)
            return None
        finally:
            self.last_warm_s = time.monotonic() - t0

    def _extras(self, job: Job, key: tuple, server: ForkServer) -> bool:
        """Run the job's extras in ``server``; False when one left it unsafe (the job runs fresh)."""
        assert job.entry is not None
        for name in job.entry.extras:
            if (key, entry_id(job), name) in self.refused_extras:
                continue
            try:
                spent = server.warm_extra(job, name)
            except ExtraFailed as exc:
                self.refused_extras[(key, entry_id(job), name)] = str(exc)
                if exc.unsafe:
                    self.drop(server)
                    return False
                continue
            if spent:
                self.last_extras[name] = spent
        return True

    def launch(self, job: Job) -> bool:
        """Start warming ``job``'s script without waiting for it (a campaign getting ready: the
        worker imports torch while the campaign goes on). True if a warm-up was started."""
        key = worker_key(job)
        if key is None or (key, entry_id(job)) in self.refused:
            return False
        server = self._find(job, key) or self._new(job, key)
        if entry_id(job) in server.loaded or entry_id(job) in server.pending:
            return False
        try:
            server.begin_load(job)
        except (WorkerError, OSError) as exc:
            self.refused[(key, entry_id(job))] = str(exc)
            self.drop(server)
            return False
        return True

    def drop(self, server: ForkServer) -> None:
        for i, (_k, s) in enumerate(self.workers):
            if s is server:
                self._drop(i)
                return

    def _drop(self, i: int) -> None:
        _key, server = self.workers.pop(i)
        server.close()

    def close(self) -> None:
        while self.workers:
            self._drop(0)

    @property
    def servers(self) -> list[ForkServer]:
        return [s for _k, s in self.workers]

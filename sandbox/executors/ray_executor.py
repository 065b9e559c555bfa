"""Ray workers: one actor per device, each holding the campaign's runner on its own node.

The actor only ever measures and returns data; the orchestrating process records every result
and verdict. Fault handling is deliberately ours, not Ray's:

* actors are created with ``max_restarts=0`` and tasks with ``max_task_retries=0`` — a Ray retry
  would measure a candidate a second time behind the store's back. A dead actor is reported as
  ``lost`` and replaced; the caller re-queues the node through its lease;
* a task running past ``hang_after_s`` (the sandbox's own time limit plus a grace) means the worker
  itself hangs, not the candidate (the sandbox would have killed that): the actor is killed and
  the task reported lost;
* actors are never detached, so they share the fate of the process that made them: if the
  orchestrator dies, Ray reclaims its actors, and with them their runners' jobs and containers.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Callable, Hashable

from arbor.sandbox.runner import Runner

from .base import Done, Executor, ExecutorError, Task

RunnerFactory = Callable[[], Runner]


class _Worker:
    """The actor's body (wrapped by ``ray.remote`` lazily, so importing this module needs no Ray)."""

    def __init__(self, runner_factory: RunnerFactory):
        self.runner = runner_factory()

    def where(self) -> dict:
        import ray

        return {"host": socket.gethostname(), "pid": os.getpid(), "node": ray.get_runtime_context().get_node_id(),
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}

    def measure(self, task: Task) -> dict:
        return task(self.runner)

    def close(self) -> None:
        self.runner.close()


def _ray():
    try:
        import ray
    except ImportError:
        raise ExecutorError("executor.kind: ray needs Ray: pip install 'arbor-opt[ray]'") from None
    return ray


class RayExecutor(Executor):
    kind = "ray"

    def __init__(self, workers: int, runner_factory: RunnerFactory, *, address: str = "auto",
                 resources_per_worker: dict[str, float] | None = None, hang_after_s: float = 600.0,
                 init_kwargs: dict | None = None, start_timeout_s: float = 120.0):
        super().__init__(workers)
        ray = _ray()
        self._ray = ray
        self._owns_ray = False
        if not ray.is_initialized():
            kw = dict(init_kwargs or {})
            kw.setdefault("include_dashboard", False)
            kw.setdefault("log_to_driver", False)
            if address not in ("local",):
                kw["address"] = address
            try:
                ray.init(**kw)
            except ConnectionError as exc:
                raise ExecutorError(f"no Ray cluster at {address!r} ({str(exc).splitlines()[0]}) — start one "
                                    "(`ray start --head`) or set executor.address: local") from None
            self._owns_ray = True
        res = dict(resources_per_worker or {"CPU": 1})
        opts = {"num_cpus": res.pop("CPU", 0), "num_gpus": res.pop("GPU", 0), "resources": res or None,
                "max_restarts": 0, "max_task_retries": 0, "scheduling_strategy": "SPREAD"}
        self._actor_cls = ray.remote(_Worker).options(**{k: v for k, v in opts.items() if v is not None})
        self._factory = runner_factory
        self.hang_after_s = hang_after_s
        self._actors: list = [None] * workers
        self._names = [f"ray worker {i}" for i in range(workers)]
        self._refs: dict = {}  # ObjectRef -> (key, slot, started)
        self._closed = False
        self.lost: list[str] = []  # why workers were lost, for the campaign's record
        try:
            for i in range(workers):
                self._spawn(i)
            where = ray.get([a.where.remote() for a in self._actors], timeout=start_timeout_s)
        except Exception as exc:
            self.close()
            if isinstance(exc, ExecutorError):
                raise
            raise ExecutorError(f"could not start {workers} Ray workers with {resources_per_worker or {'CPU': 1}} "
                                f"each ({type(exc).__name__}) — check `ray status` for free resources") from None
        self.where = where  # host, pid and Ray node of each worker as started
        self._names = [f"ray worker {i} ({w['host']} pid {w['pid']})" for i, w in enumerate(where)]

    def _spawn(self, slot: int) -> None:
        self._actors[slot] = self._actor_cls.remote(self._factory)

    def actor(self, slot: int):
        """The live actor of a slot (tests kill it to play a dead worker)."""
        return self._actors[slot]

    def _busy_slots(self) -> set[int]:
        return {slot for _, slot, _ in self._refs.values()}

    def _submit(self, key: Hashable, task: Task, meta: dict) -> str:
        slot = next(i for i in range(self.workers) if i not in self._busy_slots())
        if self._actors[slot] is None:
            self._spawn(slot)
        ref = self._actors[slot].measure.remote(task)
        self._refs[ref] = (key, slot, time.monotonic())
        return self._names[slot]

    def _collect(self, timeout: float | None) -> list[Done]:
        ray = self._ray
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = 1.0 if deadline is None else max(0.0, min(1.0, deadline - time.monotonic()))
            ready, _ = ray.wait(list(self._refs), num_returns=1, timeout=wait)
            out = [self._finish(ref) for ref in ready]
            if not out:
                out = self._kill_hung()
            if out or (deadline is not None and time.monotonic() >= deadline):
                if out:  # everything else that has ended by now comes along
                    more, _ = ray.wait(list(self._refs), num_returns=len(self._refs), timeout=0)
                    out += [self._finish(ref) for ref in more]
                return out

    def _finish(self, ref) -> Done:
        ray = self._ray
        key, slot, started = self._refs.pop(ref)
        took = time.monotonic() - started
        name = self._names[slot]
        try:
            return Done(key, name, result=ray.get(ref), duration_s=took)
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                ray.exceptions.ObjectLostError) as exc:
            why = f"{name} died mid-measurement ({type(exc).__name__})"
        except ray.exceptions.RayTaskError as exc:  # the sandbox itself failed on that worker
            return Done(key, name, exception=exc.as_instanceof_cause(), duration_s=took)
        self.lost.append(why)
        self._actors[slot] = None  # a fresh actor takes the slot at the next submit
        return Done(key, name, lost=why, duration_s=took)

    def _kill_hung(self) -> list[Done]:
        now = time.monotonic()
        out = []
        for ref, (key, slot, started) in list(self._refs.items()):
            if now - started > self.hang_after_s and self._actors[slot] is not None:
                self._ray.kill(self._actors[slot], no_restart=True)
                self._refs.pop(ref)
                why = f"{self._names[slot]} hung for {now - started:.0f} s (sandbox limit passed) and was killed"
                self.lost.append(why)
                self._actors[slot] = None
                out.append(Done(key, self._names[slot], lost=why, duration_s=now - started))
        return out

    def close(self, wait: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        ray = self._ray
        busy = self._busy_slots()
        for i, a in enumerate(self._actors):
            if a is None:
                continue
            if wait and i not in busy:  # an idle actor closes its runner (warm containers) first
                try:
                    ray.get(a.close.remote(), timeout=30)
                except Exception:  # a dead or hung actor has nothing left to close
                    pass
            ray.kill(a, no_restart=True)  # a killed actor's jobs die with it (PR_SET_PDEATHSIG)
        self._actors = [None] * self.workers
        self._refs.clear()
        if self._owns_ray:
            ray.shutdown()

    def describe(self) -> str:
        return f"ray executor: {'; '.join(self._names)}"

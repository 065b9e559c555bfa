"""Local measurement slots: each slot's jobs run on that slot's cores only, slots run at once,
and a slot never shares a core with another."""

from __future__ import annotations

import json
import sys
import time

import pytest

from arbor.sandbox.executors import Done, ExecutorError, LocalExecutor, plan_slots
from arbor.sandbox.executors.slots import available_cores
from arbor.sandbox.runners.local import LocalRunner
from arbor.sandbox.runner import Job


def test_slots_split_cores_without_sharing_and_refuse_oversubscription():
    slots = plan_slots(2, "cpu", cores=[0, 1, 2, 3])
    assert [s.cores for s in slots] == [(0, 1), (2, 3)]
    assert plan_slots(3, "cpu", cores=[0, 1, 2, 3])[2].cores == (2,)
    with pytest.raises(ExecutorError, match="workers=3 x 1 core.*2 are available.*lower executor.workers to 2"):
        plan_slots(3, "cpu", cores=[0, 1])
    with pytest.raises(ExecutorError, match="needs 2 GPUs but 1"):
        plan_slots(2, "cuda", gpus=["0"])
    gpu = plan_slots(2, "cuda", gpus=["3", "5"])
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in gpu] == ["3", "5"]
    assert [s.cores for s in plan_slots(4, "none")] == [()] * 4


def _affinity_job(sleep_s: float) -> Job:
    code = f"import os, json, time; time.sleep({sleep_s}); print(json.dumps(sorted(os.sched_getaffinity(0))))"
    return Job(argv=[sys.executable, "-c", code], files={}, timeout_s=30)


def _run(job: Job, runner) -> dict:  # a task: what a worker runs with its slot's runner
    r = runner.run(job)
    return {"cores": json.loads(r.stdout_tail), "rc": r.returncode}


@pytest.mark.timing
@pytest.mark.skipif(len(available_cores()) < 2, reason="needs 2 cores to pin two slots apart")
def test_each_slot_pins_its_jobs_and_slots_measure_at_once():
    from functools import partial

    slots = plan_slots(2, "cpu")
    with LocalExecutor(slots, lambda slot: LocalRunner()) as ex:
        t0 = time.monotonic()
        ex.submit("a", partial(_run, _affinity_job(1.0)))
        ex.submit("b", partial(_run, _affinity_job(1.0)))
        assert ex.free_slots() == 0
        with pytest.raises(ExecutorError, match="all 2 workers are busy"):
            ex.submit("c", partial(_run, _affinity_job(0)))
        done: list[Done] = []
        while len(done) < 2:
            done += ex.collect(timeout=30)
        took = time.monotonic() - t0
    seen = sorted(tuple(d.result["cores"]) for d in done)
    assert seen == sorted(s.cores for s in slots)  # each job ran on exactly its slot's cores
    assert not set(seen[0]) & set(seen[1])
    assert took < 1.9, f"two 1 s jobs took {took:.2f} s: the slots did not run at once"


def test_a_failing_sandbox_comes_back_as_the_exception_not_a_dead_slot():
    def broken(runner):
        raise RuntimeError("engine down")

    with LocalExecutor(plan_slots(1, "none"), lambda slot: LocalRunner()) as ex:
        ex.submit(1, broken)
        (d,) = ex.collect(timeout=10)
        assert isinstance(d.exception, RuntimeError) and d.result is None
        ex.submit(2, lambda runner: {"ok": True})  # the slot still works
        assert ex.collect(timeout=10)[0].result == {"ok": True}

"""The device check wired to real runners: ``check_local`` (the local runner's layers, through
``probe.decide``), ``check_container`` (Docker's warm container, whole), ``require_device`` (a
runner's check before its first measurement) and the command line ``python -m
arbor.sandbox.gpu.device_check``, which prints every attempt as a JSON line
(``scripts/device_probe.py``, ``scripts/gpu_check.sh``). The decision itself, tested with fakes,
is ``probe.py``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from dataclasses import asdict
from typing import Callable, Protocol, runtime_checkable

from ..runner import Job, JobResult, SandboxError, make_runner
from ..runners.isolation import IsolationPlan, KernelSupport
from . import probe as _probe  # DEVICE_JOB read at call time: tests and tools put their own job there
from .probe import (DOCKER_FIX, MIN_SANDBOXED_TIMEOUT_S, TIMEOUT_S, Attempt, DeviceProbe, TryPlan, decide, device_job,
                    job_result_outcome, run_bare, short_text)
from .probe_cache import ProbeCache, probe_key

__all__ = ["check_device", "require_device", "check_local", "check_container", "LayeredRunner", "main"]


# ------------------------------------------------------------------------------------ runners
@runtime_checkable
class LayeredRunner(Protocol):
    """A runner whose isolation is an ``IsolationPlan`` it can change (the local runner)."""

    network: str
    filesystem: str
    kernel: KernelSupport
    full_plan: IsolationPlan

    def run_under(self, plan: IsolationPlan, job: Job) -> JobResult: ...

    def adopt_plan(self, plan: IsolationPlan, notice: str | None = None) -> None: ...


def _local_try(runner: LayeredRunner, device: str, code: str, timeout_s: float) -> TryPlan:
    """Bare runs get the full time limit; sandboxed ones a few times what bare took (a layer that
    makes the driver hang instead of fail must not cost minutes per attempt)."""
    bare_s: list[float] = []

    def attempt(plan: IsolationPlan | None) -> tuple[bool, str]:
        if plan is None:
            t0 = time.monotonic()
            result = run_bare(device, code, timeout_s)
            bare_s.append(time.monotonic() - t0)
            return result
        limit = min(timeout_s, max(MIN_SANDBOXED_TIMEOUT_S, 4 * bare_s[0])) if bare_s else timeout_s
        try:
            return job_result_outcome(runner.run_under(plan, device_job(device, code, limit)), limit)
        except (OSError, subprocess.SubprocessError) as exc:  # the child could not apply the plan
            return False, short_text(f"{type(exc).__name__}: {exc}")

    return attempt


def check_local(runner: LayeredRunner, device: str, *, try_plan: TryPlan | None = None,
                cache: ProbeCache | None = None, code: str | None = None, timeout_s: float = TIMEOUT_S,
                exhaustive: bool = False, on_attempt: Callable[[Attempt], None] | None = None) -> DeviceProbe:
    """Probe (or recall) and make ``runner`` use the chosen plan; returns the findings."""
    code = _probe.DEVICE_JOB if code is None else code
    k = runner.kernel
    key = probe_key(network=runner.network, filesystem=runner.filesystem, landlock_abi=k.landlock_abi,
                    netns=k.netns, seccomp=k.seccomp, job_source=code, private_ns=k.private_ns)
    if cache is None and try_plan is None:  # a fake's answers never reach the machine's cache
        cache = ProbeCache()
    stored = cache.get(key) if cache is not None and not exhaustive else None
    if stored is not None and stored.get("full") == runner.full_plan.to_dict():
        probe = DeviceProbe.from_dict(stored, cached=True)
    else:
        probe = decide(runner.full_plan, try_plan or _local_try(runner, device, code, timeout_s), device=device,
                       network=runner.network, filesystem=runner.filesystem, kernel=k, exhaustive=exhaustive,
                       on_attempt=on_attempt)
        # a device absent even bare is not remembered: the next run checks again (a driver being fixed)
        if cache is not None and probe.attempts and probe.attempts[0].ok:
            cache.put(key, probe.to_dict())
    if probe.chosen is not None:
        runner.adopt_plan(probe.chosen, probe.notice)
    return probe


def check_container(runner, device: str, *, code: str | None = None,  # type: ignore[no-untyped-def]
                    timeout_s: float = TIMEOUT_S) -> DeviceProbe:
    """The device job in the runner's (warm) container: it starts, or the runner must stop."""
    probe = DeviceProbe(device=device, runner=getattr(runner, "name", "docker"))
    t0 = time.monotonic()
    try:
        # the container sees exactly the one GPU its device request names
        job = device_job("cuda", _probe.DEVICE_JOB if code is None else code, timeout_s)
        ok, err = job_result_outcome(runner.run(job), timeout_s)
    except SandboxError as exc:
        ok, err = False, short_text(str(exc).split(" — ")[0])
    probe.attempts.append(Attempt("container", [], ok, err, round(time.monotonic() - t0, 3)))
    if not ok:
        probe.fix = DOCKER_FIX
        probe.stop = f"{device} does not start inside the Docker sandbox container ({err}) — fix: {DOCKER_FIX}"
    return probe


def check_device(runner, device: str, **kw) -> DeviceProbe:  # type: ignore[no-untyped-def]
    """The device check for any runner: layered (local) or whole (a container)."""
    if isinstance(runner, LayeredRunner):
        return check_local(runner, device, **kw)
    kw.pop("cache", None)
    kw.pop("try_plan", None)
    kw.pop("exhaustive", None)
    kw.pop("on_attempt", None)
    return check_container(runner, device, **kw)


def require_device(runner, device: str) -> DeviceProbe:  # type: ignore[no-untyped-def]
    """A runner's check before its first measurement: the device starts inside it, or the runner
    is closed and stops here with the reason and the fix (``SandboxError``, one line) — never a
    campaign whose every measurement fails with a driver error. Returns the probe's findings."""
    try:
        probe = check_device(runner, device)
    except BaseException:
        runner.close()
        raise
    if probe.stop:
        runner.close()
        raise SandboxError(probe.stop)
    return probe


# ------------------------------------------------------------------------------------ command line
def main(argv: list[str] | None = None) -> int:
    """``python -m arbor.sandbox.gpu.device_check``: every attempt as a JSON line, then the choice.

    Runs unattended: exhaustive (every layer alone and the full plan without each), never answered
    from the cache (the result is written to it). Each attempt is printed when it ends, so a run
    cut short still leaves its record. Exit code 0 when a plan starts the device, 1 when the
    runner would stop."""
    ap = argparse.ArgumentParser(prog="python -m arbor.sandbox.gpu.device_check", description=main.__doc__)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--network", default="none", choices=("none", "host"))
    ap.add_argument("--filesystem", default="isolate", choices=("isolate", "host"))
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S)
    args = ap.parse_args(argv)
    # by name through the factory: the local runner runs this probe before its first GPU job
    with make_runner("local", network=args.network, filesystem=args.filesystem, device_check=False) as runner:
        print(json.dumps({"kernel": asdict(runner.kernel), "full": runner.full_plan.to_dict(),
                          "notices": runner.notices}), flush=True)
        probe = check_local(runner, args.device, exhaustive=True, timeout_s=args.timeout,
                            on_attempt=lambda a: print(json.dumps(asdict(a)), flush=True))
    print(json.dumps({"chosen": probe.plan, "broken": probe.broken, "changes": probe.changes,
                      "notice": probe.notice, "stop": probe.stop}), flush=True)
    return 0 if probe.plan is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())

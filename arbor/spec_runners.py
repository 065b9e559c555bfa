"""Runners and executors built from a campaign spec: the one place that maps ``spec.sandbox`` and
``spec.executor`` onto the sandbox package's constructors.

It sits below both the campaign engine and the target adapters (it imports only ``arbor.spec`` and
``arbor.sandbox``), so ``arbor record``, ``arbor suite``, ``arbor doctor``, the red team and the
benchmarks build the runner a campaign would, without reaching into the campaign's modules.

* ``runner_for(spec)`` — a runner with its own clock guard (every job's fingerprint carries the
  facts of the machine it ran on, and a GPU job holds its GPU's clocks); ``guarded=False`` for the
  bare runner, whose caller attaches the guard itself (``campaign/sandbox_setup``) or needs none.
* ``executor_for(spec)`` — the executor of ``executor.workers > 1`` (local slots or Ray actors),
  each worker holding a guarded runner; None for the serial loop.
"""

from __future__ import annotations

import os
from functools import partial
from typing import Any, Callable

from arbor.sandbox.executors import Executor, LocalExecutor, plan_slots
from arbor.sandbox.runner import Runner, make_runner
from arbor.spec import CampaignSpec

__all__ = ["runner_for", "executor_for", "runner_options", "spec_device", "guarded_runner", "slot_runner_factory",
           "remote_runner_factory", "HANG_GRACE_S"]

HANG_GRACE_S = 120.0  # beyond the sandbox's limit before a silent worker counts as hung


def spec_device(spec: CampaignSpec) -> str:
    """The device the target measures on ("cpu" when the target names none)."""
    return str(getattr(spec.target, "device", "cpu") or "cpu")


def runner_options(spec: CampaignSpec) -> dict:
    """``make_runner`` keyword arguments for ``spec.sandbox`` (kind-specific)."""
    sb = spec.sandbox
    max_file = int(sb.max_file_mb * (1 << 20)) if sb.max_file_mb else None
    if sb.kind == "docker":
        d = sb.docker
        return dict(image=d.image, campaign=spec.name, device=spec_device(spec), memory_gb=sb.memory_gb,
                    cpus=d.cpus, pids_limit=d.pids_limit, tmpfs_mb=d.tmpfs_mb, warm=d.warm, build=d.build,
                    base_url=d.base_url, python=d.python, max_open_files=sb.max_open_files,
                    max_file_bytes=max_file)
    return dict(network=sb.network, filesystem=sb.filesystem, max_processes=sb.max_processes,
                max_open_files=sb.max_open_files, max_file_bytes=max_file, device=spec_device(spec))


def guarded_runner(kind: str, opts: dict, clocks: str, device: str, targets: tuple, gpu_backend: str) -> Runner:
    """A runner with its own clock guard. Module-level and built from plain values, so Ray can
    ship it to another node."""
    from arbor.sandbox.gpu import ClockGuard, ClockTargets, open_backend

    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if device == "cuda" and visible and "," not in visible:  # a Ray actor's one GPU
        device = f"cuda:{visible}"
    runner = make_runner(kind, **opts)
    try:
        guard = ClockGuard(clocks, device, ClockTargets(*targets), backend_factory=partial(open_backend, gpu_backend))
        guard.start()
        runner.hooks.append(guard)
    except BaseException:
        runner.close()
        raise
    return runner


def _guard_args(spec: CampaignSpec) -> tuple:
    sb, t = spec.sandbox, spec.sandbox.clock_targets
    return sb.clocks, spec_device(spec), (t.graphics_mhz, t.memory_mhz, t.tolerance_mhz, t.settle_s), sb.gpu_backend


def runner_for(spec: CampaignSpec, guarded: bool = True, kind: str | None = None, **overrides: Any) -> Runner:
    """The runner ``spec.sandbox`` asks for (``kind`` and ``overrides`` replace the spec's kind and
    options: ``arbor doctor`` builds a Docker runner that neither builds nor probes). Raises
    ``SandboxError`` (one line) when it cannot be had."""
    kind = kind or spec.sandbox.kind
    opts = {**runner_options(spec), **overrides}
    if not guarded:
        return make_runner(kind, **opts)
    return guarded_runner(kind, opts, *_guard_args(spec))


def slot_runner_factory(spec: CampaignSpec) -> Callable[[Any], Runner]:
    """A local executor's runner for one slot: its GPU, or its share of the cores (Docker)."""
    kind, opts = spec.sandbox.kind, runner_options(spec)
    clocks, device, targets, backend = _guard_args(spec)

    def factory(slot) -> Runner:  # type: ignore[no-untyped-def]
        o = dict(opts)
        dev = f"cuda:{slot.gpu}" if slot.gpu is not None else device
        if kind == "docker":
            if slot.gpu is not None:
                o["device"] = dev
            elif slot.cores:
                o["cpus"] = float(len(slot.cores))
        return guarded_runner(kind, o, clocks, dev, targets, backend)

    return factory


def remote_runner_factory(spec: CampaignSpec) -> Callable[[], Runner]:
    """A Ray actor's runner, built on the actor's node from plain values."""
    return partial(guarded_runner, spec.sandbox.kind, runner_options(spec), *_guard_args(spec))


def executor_for(spec: CampaignSpec, uses_device: bool = True) -> Executor | None:
    """The executor ``spec.executor`` asks for, or None for the serial loop (one local worker).
    ``uses_device``: False for a target whose measurement needs no device of this machine (a
    replay), which reserves no core."""
    cfg = spec.executor
    if not cfg.parallel:
        return None
    if cfg.kind == "ray":
        from arbor.sandbox.executors.ray_executor import RayExecutor

        return RayExecutor(cfg.workers, remote_runner_factory(spec), address=cfg.address,
                           resources_per_worker=cfg.resources_per_worker,
                           hang_after_s=spec.sandbox.timeout_s + HANG_GRACE_S)
    device = spec_device(spec) if uses_device else "none"
    return LocalExecutor(plan_slots(cfg.workers, device, cfg.cores_per_worker), slot_runner_factory(spec))

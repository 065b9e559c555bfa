"""Devices for local measurement slots: every slot gets a GPU or a set of CPU cores of its own.

Two measurements on one core time each other: whichever runs second sees the other's cache and
scheduler noise as its own slowness, and the Critic cannot tell that from a regression. So slots
never share a core; asking for more slots than there are cores (or GPUs) is an error, not a
quiet oversubscription.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field

from .base import ExecutorError


@dataclass(frozen=True)
class SlotDevice:
    index: int
    cores: tuple[int, ...] = ()  # CPU cores this slot's jobs may run on (empty: not pinned)
    gpu: str | None = None  # the GPU this slot's jobs see as cuda:0
    env: dict = field(default_factory=dict, hash=False, compare=False)

    def describe(self) -> str:
        if self.gpu is not None:
            return f"slot {self.index}: GPU {self.gpu}"
        return f"slot {self.index}: cores {','.join(map(str, self.cores))}" if self.cores else f"slot {self.index}"


def available_cores() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return list(range(os.cpu_count() or 1))


def visible_gpus() -> list[str]:
    """GPU ids this process may use: CUDA_VISIBLE_DEVICES when set, else what nvidia-smi lists."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip() and g.strip() != "-1"]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(l for l in out.splitlines() if l.startswith("GPU "))]


def plan_slots(workers: int, device: str = "cpu", cores_per_worker: int | None = None,
               cores: list[int] | None = None, gpus: list[str] | None = None) -> list[SlotDevice]:
    """One device per slot. CPU: the available cores split into disjoint sets (``cores_per_worker``
    each, default an even split). CUDA: one visible GPU per slot. ``none``: slots whose work
    uses no device of this machine (a replayed measurement, a remote server) are not pinned."""
    if device == "none":
        return [SlotDevice(i) for i in range(workers)]
    if device.startswith("cuda"):
        gpus = visible_gpus() if gpus is None else gpus
        if len(gpus) < workers:
            raise ExecutorError(f"executor.workers={workers} needs {workers} GPUs but {len(gpus)} are visible — "
                                f"lower executor.workers to {max(len(gpus), 1)} or use executor.kind: ray")
        return [SlotDevice(i, gpu=g, env={"CUDA_VISIBLE_DEVICES": g}) for i, g in enumerate(gpus[:workers])]
    cores = available_cores() if cores is None else sorted(cores)
    per = cores_per_worker or max(len(cores) // workers, 1)
    if per * workers > len(cores):
        raise ExecutorError(f"executor.workers={workers} x {per} core(s) each needs {per * workers} cores but "
                            f"{len(cores)} are available — lower executor.workers to {max(len(cores) // per, 1)} "
                            "(slots never share a core)")
    return [SlotDevice(i, cores=tuple(cores[i * per:(i + 1) * per])) for i in range(workers)]


def pin_current_thread(slot: SlotDevice) -> None:
    """Pin the calling thread (Linux affinity is per thread) so every job it starts inherits it."""
    if slot.cores:
        os.sched_setaffinity(0, slot.cores)

"""The GPU side of the sandbox, behind one small interface.

Runners, the campaign wiring, the Critic and ``arbor doctor`` import from here, never from the
modules inside, so the GPU code can change shape without touching them:

* clock control — ``ClockGuard`` (a runner hook: lock / verify / ignore, throttle sampling, the
  restore on every way out), ``ClockTargets``, ``open_backend`` (NVML, nvidia-smi, amd-smi),
  ``ClockError``, ``decode_throttle``, ``owner_alive`` (is a recorded lock's owner still running);
* device identity — ``device_uuid`` (the physical GPU a job's ``CUDA_VISIBLE_DEVICES`` names) and
  ``check_identity`` (the harness saw the GPU the runner pinned);
* the device check — ``check_device`` (does the device start under the runner's isolation? the
  local runner gets the strongest plan that starts it, or a one-line stop with the fix; cached by
  ``ProbeCache``), ``DeviceProbe`` (its findings), ``DEVICE_JOB`` (the tiny device job);
* peaks — ``gpu_peak``, ``peak_for`` (the Critic's floor), ``sol_rates`` and ``speed_of_light`` (the
  campaign's position), ``bandwidth_at``, ``within_peak`` (readings capped by physics), and the
  per-host cache of measured peaks (``cached_cpu_peak``, ``cached_gpu_peak``, ``store_*``).

Inside: ``clocks`` (the guard), ``clock_targets`` (where clocks must be; is a reading off them),
``lock_owner`` (does a recorded lock's owner still run), ``control`` (backends), ``smi`` (the command-line backends),
``state`` (``GpuState``, throttle bits, ``ClockError``), ``watch`` (throttle sampling under load),
``identity``, ``devices`` (peaks), ``probe`` + ``probe_cache`` (the device check).
"""

from __future__ import annotations

from .clocks import ClockGuard, ClockTargets
from .control import GpuBackend, open_backend
from .devices import (ABOVE_PEAK_TOLERANCE, allowed_cores, bandwidth_at, cached_cpu_peak, cached_gpu_peak, flops_at,
                      gpu_peak, mark_cpu_peak_stale, merge_peaks, min_time_s, peak_for, sol_rates, speed_of_light,
                      store_cpu_peak, store_gpu_peak, within_peak)
from .identity import check_identity, device_uuid
from .lock_owner import owner_alive
from .device_check import check_device, require_device
from .probe import DEVICE_JOB, DeviceProbe
from .probe_cache import ProbeCache
from .state import ClockError, GpuState, decode_throttle

__all__ = ["ClockGuard", "ClockTargets", "owner_alive", "GpuBackend", "open_backend", "ClockError",
           "GpuState", "decode_throttle", "check_identity", "device_uuid", "gpu_peak", "peak_for",
           "min_time_s", "cached_cpu_peak", "store_cpu_peak", "cached_gpu_peak", "store_gpu_peak", "sol_rates",
           "speed_of_light", "bandwidth_at", "flops_at", "within_peak", "ABOVE_PEAK_TOLERANCE", "allowed_cores",
           "merge_peaks", "mark_cpu_peak_stale", "check_device", "require_device", "DeviceProbe", "DEVICE_JOB", "ProbeCache"]

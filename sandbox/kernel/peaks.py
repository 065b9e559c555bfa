"""The per-host peaks around one kernel measurement: filled into the request from the cache before
the job (what is missing the harness measures), kept after it, and marked stale when the reference
itself moved its bytes or did its math faster than a cached CPU peak allows (``sandbox/gpu/devices.py``
keeps them).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from arbor.sandbox.gpu import (ABOVE_PEAK_TOLERANCE, cached_cpu_peak, cached_gpu_peak, mark_cpu_peak_stale,
                               sol_rates, speed_of_light, store_cpu_peak, store_gpu_peak)

if TYPE_CHECKING:
    from arbor.sandbox.kernel.values import KernelMeasurement, KernelRequest


def with_peaks(req: KernelRequest) -> KernelRequest:
    """Fill the peaks from the per-host cache; what is still missing the harness measures. The
    campaign threads' peak counts as missing without its transcendental vector rates (an entry
    stored before the probe, or by hand): the position would read them at FLOP equivalents."""
    if req.device.startswith("cuda"):
        return req if req.sol_peak is not None else replace(req, sol_peak=cached_gpu_peak())
    peak = req.peak if req.peak is not None else cached_cpu_peak()
    sol = req.sol_peak if req.sol_peak is not None else cached_cpu_peak(req.num_threads)
    return replace(req, peak=peak, sol_peak=sol if sol is None or sol.get("vector") else None)


def keep_peaks(req: KernelRequest, stats: dict) -> None:
    """Cache the peaks a harness measured (merged by maximum), so the next job skips them."""
    for key in ("peak", "sol_peak"):
        peak = stats.get(key) or {}
        if peak.get("source") != "measured":
            continue
        if req.device.startswith("cuda"):
            store_gpu_peak(peak)
        elif peak.get("bandwidth"):
            store_cpu_peak(peak)


def check_peaks(req: KernelRequest, m: KernelMeasurement) -> None:
    """The reference itself moved its bytes, or did its math, faster than a CPU peak allows at its
    working set: that peak was measured on a busy machine (or cached from one). The next job
    measures it again. The math is its FLOPs at the GEMM rate plus its transcendentals at their
    vector rates, as the speed of light counts it (``speed_of_light``)."""
    cost = m.stats.get("cost") or {}
    nbytes = cost.get("bytes")
    if req.device.startswith("cuda") or not nbytes or not m.baseline_samples:
        return
    times = sorted(m.baseline_samples)
    took = max(times[len(times) // 2], 1e-12)
    for key in ("peak", "sol_peak"):
        peak = m.stats.get(key) or {}
        if not peak.get("bandwidth"):
            continue
        rates = sol_rates({"device": "cpu"}, cost.get("dtype"), peak, nbytes)
        bound = speed_of_light(nbytes, cost.get("flops"), rates, cost.get("transcendentals"))
        memory_s, compute_s = (bound or {}).get("memory_s") or 0.0, (bound or {}).get("compute_s") or 0.0
        if max(memory_s, compute_s) > took * (1 + ABOVE_PEAK_TOLERANCE):
            mark_cpu_peak_stale(peak.get("threads"))

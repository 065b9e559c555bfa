"""A speed of light that counts the math: the compute bound (FLOPs plus each transcendental at the
machine's vector rate) against the memory bound, the one that binds named, ``left`` the lower
headroom, and the probe's rates cached per host like the other peaks."""

from __future__ import annotations

import pytest

from arbor.campaign.speed_of_light import from_measurement
from arbor.sandbox.gpu import devices
from arbor.sandbox.kernel.protocol import KernelRequest
from arbor.sandbox.kernel.peaks import with_peaks

MB = 1 << 20
N = 4 << 20  # GELU on 4.2M float32 elements: 32 MiB in and out
VECTOR = {"erf": 0.35e9, "exp": 0.56e9}
ONE = {"threads": 1, "bandwidth": [[32 << 10, 100e9], [16 * MB, 12.8e9]], "bytes_per_s": 12.8e9,
       "flops": {"float32": 50e9}, "flops_per_s": 50e9, "vector": VECTOR, "source": "measured"}
FP = {"device": "cpu", "cpu_affinity": 2}


def gelu(reference_s: float, sol_peak: dict = ONE):
    cost = {"bytes": 2 * N * 4, "flops": 4 * N, "transcendentals": {"erf": N}, "dtype": "float32"}
    return from_measurement({"cost": cost, "sol_peak": sol_peak, "peak": sol_peak}, FP, reference_s)


def test_an_erf_bound_gelu_is_compute_bound_at_the_faster_of_the_measured_and_the_generated_erf():
    # ATen's erf measured at 0.35 G/s (2.9 ns) is slower than Arbor's generated erf at the FP32 rate
    # (op_math.GENERATED_FLOPS: 46 FLOPs at 50 GFLOP/s, 0.92 ns): the bound is the faster one
    pos = gelu(4.6e-3)
    compute = N * 46 / 50e9 + 4 * N / 50e9
    assert pos.bound == "compute" and pos.compute_s == pytest.approx(compute)
    assert pos.memory_s == pytest.approx(2 * N * 4 / 12.8e9) and pos.seconds == pytest.approx(compute)
    assert pos.left == pytest.approx(4.6e-3 / compute) and pos.left < 1.3  # not the memory bound's 1.8x
    assert pos.left_at(pos.seconds * 2) == pytest.approx(2.0)
    text = pos.describe()
    assert text.startswith("compute-bound: 4.19M erf at the measured vector rates or the generated math + 0.0168 GFLOP")
    assert text.endswith("; memory 2.62 ms")
    assert "cheaper transcendentals" in pos.advice()
    assert pos.line(4.6e-3, 4.6e-3).startswith("reference 91% of compute-bound")
    fast = gelu(4.6e-3, {**ONE, "vector": {"erf": 2e9}})  # a measured rate faster than the generated math
    assert fast.compute_s == pytest.approx(N / 2e9 + 4 * N / 50e9)


def test_a_copy_like_problem_is_memory_bound_and_says_its_compute_beside():
    cost = {"bytes": 2 * N * 4, "flops": N, "transcendentals": None, "dtype": "float32"}
    pos = from_measurement({"cost": cost, "sol_peak": ONE, "peak": ONE}, FP, 6.5e-3)
    assert pos.bound == "memory" and pos.seconds == pytest.approx(2 * N * 4 / 12.8e9)
    assert pos.left == pytest.approx(6.5e-3 / pos.seconds)
    assert pos.describe().startswith("memory-bound: 33.6 MB at 12.8 GB/s") and "; compute 83.9 us" in pos.describe()


def test_without_measured_rates_a_transcendental_reads_its_flop_equivalent():
    old = {k: v for k, v in ONE.items() if k != "vector"}  # a measurement from before the probe
    pos = gelu(13.6e-3, old)
    assert pos.compute_s == pytest.approx((N * 24 + 4 * N) / 50e9) and not pos.vector_measured
    assert pos.bound == "memory" and pos.describe().endswith("; compute 2.35 ms")
    slow = gelu(13.6e-3, {**old, "flops": {"float32": 10e9}, "flops_per_s": 10e9})
    assert slow.bound == "compute" and "4.19M erf at FLOP equivalents" in slow.describe()


def test_the_probes_rates_are_cached_per_host_merged_by_maximum(tmp_path, monkeypatch):
    monkeypatch.setenv("ARBOR_CACHE_DIR", str(tmp_path))
    devices.store_cpu_peak(ONE)
    assert devices.cached_cpu_peak(1)["vector"] == VECTOR
    devices.store_cpu_peak({**ONE, "vector": {"erf": 0.2e9, "exp": 0.6e9}})  # a busier run lowers nothing
    assert devices.cached_cpu_peak(1)["vector"] == {"erf": 0.35e9, "exp": 0.6e9}
    req = KernelRequest(problem_source="", candidate_source="", num_threads=1)
    assert with_peaks(req).sol_peak["vector"]["erf"] == 0.35e9  # the next job skips the probe
    monkeypatch.setenv("ARBOR_CACHE_DIR", str(tmp_path / "other"))
    devices.store_cpu_peak({k: v for k, v in ONE.items() if k != "vector"})  # an entry without the rates
    assert with_peaks(req).sol_peak is None  # the harness measures them

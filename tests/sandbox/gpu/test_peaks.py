"""Peak rates: the bandwidth a working set can reach, the per-host cache (one entry per thread
count, merged by maximum, measured again once a reference beat it), the Critic's floor peak, and
the GPU's measured rates beside its datasheet row."""

from __future__ import annotations

import pytest

from arbor.sandbox.gpu import devices
from arbor.sandbox.kernel.protocol import KernelMeasurement, KernelRequest
from arbor.sandbox.kernel.peaks import check_peaks

MB = 1 << 20
CURVE = [[32 << 10, 30e9], [256 << 10, 90e9], [2 * MB, 60e9], [16 * MB, 45e9], [64 * MB, 12e9], [256 * MB, 14e9]]


def test_a_working_set_reads_the_bandwidth_of_the_largest_level_it_cannot_beat():
    peak = {"bandwidth": CURVE}
    assert devices.bandwidth_at(peak, 128 * MB) == 14e9  # beyond the LLC: the envelope's DRAM rate
    assert devices.bandwidth_at(peak, 8 * MB) == 60e9  # between points: the faster, lenient one
    assert devices.bandwidth_at(peak, 4 << 10) == 90e9  # below every point: the fastest
    assert devices.bandwidth_at(peak, None) == 90e9
    assert devices.bandwidth_at({"bytes_per_s": 3.35e12}, 1e9) == 3.35e12  # a table row has one figure
    assert devices.flops_at({"flops": {"float32": 1e11, "bfloat16": 4e11}}, "float16") == 4e11
    assert devices.flops_at({"flops": {"float32": 1e11}}, "float64") == 1e11


def test_the_floor_never_gets_stricter_than_either_measured_peak():
    busy_all_cores = {"threads": 2, "bandwidth": [[f, r / 3] for f, r in CURVE], "flops_per_s": 1e11}
    one_thread = {"threads": 1, "bandwidth": CURVE, "flops_per_s": 5e10}
    fp = {"device": "cpu"}
    assert devices.peak_for(fp, "float32", busy_all_cores, 128 * MB)["bytes_per_s"] == pytest.approx(14e9 / 3)
    assert devices.peak_for(fp, "float32", busy_all_cores, 128 * MB, one_thread)["bytes_per_s"] == 14e9
    gpu = devices.peak_for({"device": "cuda:0", "gpu_name": "NVIDIA H100 80GB HBM3"}, "bfloat16", None)
    assert gpu["bytes_per_s"] == 3.35e12 and gpu["flops_per_s"] == 990e12


def test_the_position_reads_a_gpus_measured_rates_where_the_harness_measured_them():
    fp = {"device": "cuda:0", "gpu_name": "NVIDIA H100 80GB HBM3"}
    measured = {"name": "NVIDIA H100 80GB HBM3", "bytes_per_s": 2.9e12, "flops": {"float32": 5.1e13,
                                                                                 "bfloat16": 7.5e14}}
    assert devices.sol_rates(fp, "float32", measured)["bytes_per_s"] == 2.9e12
    assert devices.sol_rates(fp, "bfloat16", measured)["flops_per_s"] == 7.5e14
    table = devices.sol_rates(fp, "float32", None)
    assert table["bytes_per_s"] == 3.35e12 and table["source"] == "datasheet H100 SXM"


def test_the_cache_keeps_one_entry_per_thread_count_merged_by_maximum(tmp_path, monkeypatch):
    monkeypatch.setenv("ARBOR_CACHE_DIR", str(tmp_path))
    one = {"threads": 1, "bandwidth": CURVE, "bytes_per_s": 14e9, "flops": {"float32": 1e11}, "source": "measured"}
    devices.store_cpu_peak(one)
    assert devices.cached_cpu_peak(1)["bytes_per_s"] == 14e9 and devices.cached_cpu_peak(2) is None
    slower = {**one, "bandwidth": [[f, r / 2] for f, r in CURVE], "bytes_per_s": 7e9, "flops": {"float32": 2e11}}
    devices.store_cpu_peak(slower)  # measured on a busy machine: it can only raise what is cached
    got = devices.cached_cpu_peak(1)
    assert got["bandwidth"] == CURVE and got["bytes_per_s"] == 14e9 and got["flops"]["float32"] == 2e11
    devices.mark_cpu_peak_stale(1)
    assert devices.cached_cpu_peak(1) is None  # the next job measures it again
    faster = {**one, "bandwidth": [[f, r * 1.5] for f, r in CURVE], "bytes_per_s": 21e9}
    devices.store_cpu_peak(faster)
    assert devices.cached_cpu_peak(1)["bytes_per_s"] == 21e9


def test_a_reference_faster_than_the_cached_peak_makes_it_stale(tmp_path, monkeypatch):
    monkeypatch.setenv("ARBOR_CACHE_DIR", str(tmp_path))
    stale = {"threads": 1, "bandwidth": [[f, r / 3] for f, r in CURVE], "bytes_per_s": 14e9 / 3, "source": "measured"}
    devices.store_cpu_peak(stale)
    req = KernelRequest(problem_source="", candidate_source="", num_threads=1)
    m = KernelMeasurement("ok", None, None, [], [6.5e-3] * 9, [6.5e-3] * 9, 1, {}, 1.0, {},
                          stats={"cost": {"bytes": 130 * MB}, "sol_peak": devices.cached_cpu_peak(1)})
    check_peaks(req, m)  # 21 GB/s moved by the reference itself, against 4.7 GB/s cached
    assert devices.cached_cpu_peak(1) is None
    devices.store_cpu_peak({**stale, "bandwidth": CURVE, "bytes_per_s": 14e9})
    m.stats["sol_peak"] = devices.cached_cpu_peak(1)
    m.baseline_samples = [9.9e-3] * 9  # 13.8 GB/s: within the measured peak
    check_peaks(req, m)
    assert devices.cached_cpu_peak(1) is not None


def test_a_reference_whose_math_outran_the_cached_gemm_rate_makes_it_stale(tmp_path, monkeypatch):
    """A GEMM's reference at 0.35 ms for 33.5 MFLOP is 96 GFLOP/s: a cached 50 GFLOP/s was measured
    on a busy machine, though its bandwidth is fine for the 0.8 MB it moves."""
    monkeypatch.setenv("ARBOR_CACHE_DIR", str(tmp_path))
    slow = {"threads": 1, "bandwidth": CURVE, "bytes_per_s": 14e9, "flops": {"float32": 50e9}, "source": "measured"}
    devices.store_cpu_peak(slow)
    req = KernelRequest(problem_source="", candidate_source="", num_threads=1)
    cost = {"bytes": 0.8 * MB, "flops": 2 * 256 ** 3, "dtype": "float32"}
    m = KernelMeasurement("ok", None, None, [], [0.35e-3] * 9, [0.35e-3] * 9, 1, {}, 1.0, {},
                          stats={"cost": cost, "sol_peak": devices.cached_cpu_peak(1)})
    check_peaks(req, m)
    assert devices.cached_cpu_peak(1) is None
    devices.store_cpu_peak({**slow, "flops": {"float32": 100e9}})
    m.stats["sol_peak"] = devices.cached_cpu_peak(1)
    check_peaks(req, m)  # 96 GFLOP/s within the measured 100
    assert devices.cached_cpu_peak(1) is not None


@pytest.mark.gpu
def test_a_boards_measured_rates_stay_below_its_datasheet():
    import torch

    from arbor.sandbox.harness import cost

    p = cost.measure_gpu_peak("cuda:0")
    table = devices.gpu_peak(torch.cuda.get_device_name(0))
    assert p is not None and p["name"] == torch.cuda.get_device_name(0)
    assert 0.3e12 < p["bytes_per_s"] and p["flops"]["bfloat16"] > p["flops"]["float32"] > 0
    if table is not None:
        assert p["bytes_per_s"] <= 1.05 * table.bytes_per_s
        assert p["flops"]["bfloat16"] <= 1.05 * table.half_flops

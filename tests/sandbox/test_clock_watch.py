"""Per-sample GPU clock evidence (sandbox/harness/clock_watch.py): the ctypes reader against a
compiled stand-in for libnvidia-ml.so.1 with NVML's documented signatures, and the per-side
recording with an injected reader."""

from __future__ import annotations

import ctypes

import pytest

from arbor.sandbox.harness import clock_watch

UUID, PCI = "GPU-00000000-aaaa-bbbb-cccc-000000000000", "0000:18:00.0"


def _set(path: str, sm: int, mem: int, reasons: int, power_ns: int = 0, thermal_ns: int = 0) -> None:
    lib = ctypes.CDLL(path)  # the same loaded library the reader holds: its globals are shared
    lib.fake_nvml_set(ctypes.c_uint(sm), ctypes.c_uint(mem), ctypes.c_ulonglong(reasons),
                      ctypes.c_ulonglong(power_ns), ctypes.c_ulonglong(thermal_ns))


def test_the_reader_finds_the_gpu_by_uuid_or_pci_and_reads_the_four_queries(libnvml):
    path = libnvml()
    _set(path, 1590, 2619, 0x4, power_ns=7_000, thermal_ns=5)
    r = clock_watch.NvmlReader(UUID, None, path)
    assert r.read() == (1590, 2619, 0x4, 7_005)
    assert clock_watch.NvmlReader("GPU-MIG-not-known", PCI, path).read() == (1590, 2619, 0x4, 7_005)  # by PCI
    with pytest.raises(clock_watch.NvmlUnavailable, match="no GPU with UUID GPU-x or PCI bus id None"):
        clock_watch.NvmlReader("GPU-x", None, path)
    old = libnvml(old_driver=True)  # a driver from before the rename to clocks *event* reasons
    _set(old, 1410, 1593, 0x1)
    assert clock_watch.NvmlReader(UUID, None, old).read() == (1410, 1593, 0x1, 0)


def test_a_reading_is_cheap_and_its_cost_is_reported(libnvml):
    path = libnvml()
    _set(path, 1590, 2619, 0)
    watch, facts = clock_watch.open_watch({"device_uuid": UUID}, path)
    assert watch is not None and facts == {"source": "nvml"}
    for side in (0, 1) * 200:
        watch.before()
        watch.after(side)
    f = watch.facts()
    assert f["reads"] == 800 and f["failed_reads"] == 0
    assert 0 < f["read_us"] < 1000  # ctypes + the stand-in; a real driver adds its own ioctls
    lib = ctypes.CDLL(path)
    lib.fake_nvml_calls.restype = ctypes.c_long
    before = lib.fake_nvml_calls()
    watch.before()
    assert lib.fake_nvml_calls() - before == 5  # SM, memory, reasons, power and thermal violations


def test_no_nvml_means_no_per_sample_evidence_and_the_facts_say_why(tmp_path):
    watch, facts = clock_watch.open_watch({"device_uuid": UUID}, str(tmp_path / "libnvidia-ml.so.1"))
    assert watch is None and facts["source"] is None and "cannot be loaded" in facts["why"]
    watch, facts = clock_watch.open_watch({})
    assert watch is None and "neither a UUID nor a PCI bus id" in facts["why"]


class Gpu:
    """An injected reader: the state a test sets, as NVML would report it."""

    def __init__(self) -> None:
        self.sm, self.mem, self.reasons, self.viol = 1590, 2619, 0, 0
        self.fail = False

    def read(self):  # type: ignore[no-untyped-def]
        return None if self.fail else (self.sm, self.mem, self.reasons, self.viol)


def test_each_reading_is_attributed_to_the_side_whose_sample_it_bracketed():
    gpu = Gpu()
    watch = clock_watch.ClockWatch(gpu.read)

    def sample(side: int, capped: bool, viol_ns: int = 0) -> None:
        watch.before()
        if capped:  # the power cap engaged while this side's calls ran
            gpu.reasons, gpu.sm, gpu.viol = 0x4, 1410, gpu.viol + viol_ns
        watch.after(side)
        gpu.reasons, gpu.sm = 0, 1590

    for rnd in range(10):  # ABBA; only the reference draws enough power to hit the cap
        for side in ((0, 1) if rnd % 2 == 0 else (1, 0)):
            sample(side, capped=side == 0, viol_ns=2_000_000)
    a, b = watch.facts()["sides"]
    assert (a["n"], a["throttled"], a["reasons"], a["violation_ms"]) == (10, 10, 0x4, 20.0)
    assert (b["n"], b["throttled"], b["reasons"], b["violation_ms"]) == (10, 0, 0, 0.0)
    assert a["sm_mhz"] == {"1410": 10} and b["sm_mhz"] == {"1590": 10} and b["mem_mhz"] == {"2619": 10}


def test_idle_readings_leave_the_clock_statistics_and_failed_reads_leave_the_sample():
    gpu = Gpu()
    watch = clock_watch.ClockWatch(gpu.read)
    watch.before()
    gpu.reasons, gpu.sm = 0x1, 345  # the device went idle before the after-reading: clocks dropping
    watch.after(1)
    gpu.fail = True
    watch.before()
    watch.after(0)
    f = watch.facts()
    assert f["sides"][1]["n"] == 1 and f["sides"][1]["idle"] == 1 and f["sides"][1]["sm_mhz"] == {}
    assert f["sides"][0]["n"] == 0 and f["failed_reads"] == 2

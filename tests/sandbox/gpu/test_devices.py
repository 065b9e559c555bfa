"""The CPU peak cache: measured once per machine; where the cache cannot be written, once per
process (never once per measurement)."""

from __future__ import annotations

from arbor.sandbox.gpu import devices


def test_a_stored_peak_is_found_again(tmp_path, monkeypatch):
    monkeypatch.setenv("ARBOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(devices, "_MEMO", {})
    assert devices.cached_cpu_peak(key="k") is None
    devices.store_cpu_peak({"flops_per_s": 2e11, "bytes_per_s": 3e10, "threads": 2}, "k")
    got = devices.cached_cpu_peak(key="k")
    assert got == {"flops_per_s": 2e11, "bytes_per_s": 3e10, "threads": 2, "source": "cached"}
    assert (tmp_path / "device_peaks.json").is_file()


def test_an_unwritable_cache_still_remembers_the_peak_in_this_process(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")  # a cache dir beneath a file cannot be created, not even by root
    monkeypatch.setenv("ARBOR_CACHE_DIR", str(blocker / "arbor"))
    monkeypatch.setattr(devices, "_MEMO", {})
    devices.store_cpu_peak({"flops_per_s": 1e11, "bytes_per_s": 2e10, "threads": 2}, "k")
    assert not (blocker / "arbor").exists()
    assert devices.cached_cpu_peak(key="k")["bytes_per_s"] == 2e10

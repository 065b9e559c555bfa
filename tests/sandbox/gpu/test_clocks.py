"""Clock control: lock / verify / ignore through a minimal fake GPU, the real NVML path on a machine
without a GPU (one-line reason), and the store records that let a crashed run's lock be undone.
The backends against fakes of the documented driver behaviour are in test_paths.py."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from arbor.sandbox.gpu.clocks import ClockGuard, ClockTargets
from arbor.sandbox.gpu.control import (AmdSmiBackend, ClockError, GpuState, NvidiaSmiBackend, NvmlBackend,
                                       decode_throttle, open_backend)
from arbor.sandbox.runners.local import LocalRunner
from arbor.sandbox.runner import Job


class FakeGpu:
    """A GPU whose clocks follow lock() unless told to ignore it or to refuse."""

    name = "fake"

    def __init__(self, refuse: bool = False, sticky: bool = True, boost: int = 1980, mem: int = 2619) -> None:
        self.refuse, self.sticky = refuse, sticky
        self.graphics, self.memory, self.reasons = boost, mem, 0
        self.calls: list[tuple] = []

    def count(self) -> int:
        return 1

    def state(self, index: int) -> GpuState:
        return GpuState(index, "Fake H100", "GPU-fake-uuid", "550.54", self.graphics, self.memory, self.graphics,
                        41.0, 120.5, self.reasons)

    def default_targets(self, index: int):
        return 1410, 2619

    def lock(self, index: int, g, m) -> None:
        self.calls.append(("lock", g, m))
        if self.refuse:
            raise ClockError("fake: permission denied — run as root")
        if self.sticky:
            self.graphics, self.memory = g or self.graphics, m or self.memory

    def reset(self, index: int) -> None:
        self.calls.append(("reset",))
        self.graphics = 1980


def guard(gpu: FakeGpu, mode: str = "lock", **kw) -> ClockGuard:
    return ClockGuard(mode, "cuda:0", backend_factory=lambda: gpu, sleep=lambda s: None,
                      load=lambda key: contextlib.nullcontext(), **kw)


def test_lock_reads_back_fingerprints_and_restores():
    gpu, events = FakeGpu(), []
    g = guard(gpu, on_lock=lambda r: events.append(("locked", dict(r), list(gpu.calls))),
              on_restore=lambda r: events.append(("restored", r["reason"])))
    rec = g.start()
    assert rec["graphics_mhz"] == 1410 and rec["memory_mhz"] == 2619 and rec["uuid"] == "GPU-fake-uuid"
    assert events[0][0] == "locked" and events[0][2] == []  # recorded *before* the driver call
    res = LocalRunner().run(Job([sys.executable, "-c", "pass"], {}, timeout_s=30))
    g.after(Job([], {}, 1), res)
    fp = res.fingerprint
    assert fp["clock_mode"] == "lock" and fp["clocks_locked"] is True and fp["gpu_graphics_mhz"] == 1410
    assert fp["gpu_uuid"] == "GPU-fake-uuid" and fp["gpu_driver"] == "550.54" and fp["gpu_power_w"] == 120.5
    assert fp["gpu_temperature_c"] == 41.0 and fp["gpu_throttle"] == [] and fp["host"] and "governor" in fp
    g.close()
    g.close()  # idempotent
    assert gpu.calls == [("lock", 1410, 2619), ("reset",)] and events[-1] == ("restored", "campaign ended")


def test_lock_that_does_not_take_refuses_to_measure_and_restores():
    gpu, restored = FakeGpu(sticky=False), []
    g = guard(gpu, on_restore=lambda r: restored.append(r["reason"]))
    with pytest.raises(ClockError, match=r"graphics 1980 MHz \(want 1410±50\)") as exc:
        g.start()
    assert "\n" not in str(exc.value)
    assert gpu.calls[-1] == ("reset",) and restored == ["the lock was refused or did not take"]


def test_lock_refused_is_one_line_with_the_fix():
    gpu = FakeGpu(refuse=True)
    with pytest.raises(ClockError, match="root"):
        guard(gpu).start()
    assert gpu.calls[-1] == ("reset",)


def test_drift_before_a_job_relocks_once_then_refuses():
    gpu = FakeGpu()
    g = guard(gpu)
    g.start()
    gpu.graphics = 1755  # another tool reset the clocks
    g.before(Job([], {}, 1))
    assert gpu.graphics == 1410 and gpu.calls.count(("lock", 1410, 2619)) == 2
    gpu.sticky, gpu.graphics = False, 1755
    with pytest.raises(ClockError, match="not where they must be"):
        g.before(Job([], {}, 1))
    g.close()


def test_idle_gpu_below_its_lock_is_not_a_failure_between_jobs():
    gpu = FakeGpu()
    g = guard(gpu, targets=ClockTargets(1410, None))
    g.start()
    gpu.graphics, gpu.reasons = 345, 0x1  # GPU idle between jobs: clocks drop until work arrives
    g.before(Job([], {}, 1))
    g.after(Job([], {}, 1), LocalRunner().run(Job([sys.executable, "-c", "pass"], {}, timeout_s=30)))
    g.close()


def test_a_gpu_that_stays_idle_under_the_load_burst_cannot_verify_a_lock():
    gpu = FakeGpu(sticky=False)
    gpu.graphics, gpu.reasons = 345, 0x1
    with pytest.raises(ClockError, match="idle during the load burst"):
        guard(gpu, targets=ClockTargets(1410, None)).start()


def test_verify_and_ignore_modes():
    gpu = FakeGpu()
    assert guard(gpu, "verify").start() is None and gpu.calls == []  # verify changes nothing
    with pytest.raises(ClockError, match="lock them"):
        guard(gpu, "verify", targets=ClockTargets(1410, None)).start()
    gpu.graphics = 1410
    guard(gpu, "verify", targets=ClockTargets(1410, None)).start()

    def no_gpu():
        raise ClockError("NVML: library not found (no NVIDIA driver on this machine)")

    for mode in ("verify", "ignore"):
        g = ClockGuard(mode, "cuda", backend_factory=no_gpu)
        assert g.start() is None
        assert g.fingerprint()["gpu_error"].startswith("NVML: library not found")
    with pytest.raises(ClockError, match="library not found"):
        ClockGuard("lock", "cuda", backend_factory=no_gpu).start()
    with pytest.raises(ClockError, match="needs a GPU target"):
        ClockGuard("lock", "cpu").start()
    cpu = ClockGuard("verify", "cpu")
    assert cpu.start() is None and "gpu_error" not in cpu.fingerprint()


def test_throttle_reasons_decoded_and_flagged():
    gpu = FakeGpu()
    gpu.reasons = 0x4 | 0x40
    g = guard(gpu, "ignore")
    g.start()
    fp = g.fingerprint()
    assert fp["gpu_throttle"] == ["sw_power_cap", "hw_thermal"] and fp["gpu_throttled"] is True
    assert decode_throttle(0x1) == ["gpu_idle"]


def test_real_nvml_without_a_gpu_fails_in_one_line():
    try:
        import pynvml  # noqa: F401
    except ImportError:
        with pytest.raises(ClockError, match="nvidia-ml-py is not installed"):
            NvmlBackend()
        return
    try:
        NvmlBackend()
    except ClockError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("NVML: ")
    else:
        pytest.skip("NVML works here (a GPU machine)")
    with pytest.raises(ClockError) as exc:
        open_backend("auto")
    assert "\n" not in str(exc.value) and "NVML" in str(exc.value)


_SIGTERM_SCRIPT = """
import sys, time
sys.path.insert(0, {tests!r})
from test_clocks import FakeGpu, guard
class Logged(FakeGpu):
    def reset(self, index):
        open({log!r}, 'a').write('reset\\n')
g = guard(Logged())
g.start()
print('locked', flush=True)
time.sleep(60)
"""


def test_sigterm_restores_clocks(tmp_path):
    log = tmp_path / "log"
    script = _SIGTERM_SCRIPT.format(tests=str(Path(__file__).parent), log=str(log))
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "locked"
    p.send_signal(signal.SIGTERM)
    assert p.wait(30) == 128 + signal.SIGTERM
    assert log.read_text() == "reset\n"


def test_campaign_records_lock_and_restores_after_a_crash(tmp_path, monkeypatch, device_starts):
    import arbor.campaign.sandbox_setup as setup
    from arbor.search_tree import open_store
    from arbor.spec import parse_spec

    gpu = FakeGpu()
    monkeypatch.setattr(setup, "open_backend", lambda pref="auto": gpu)
    monkeypatch.setattr("arbor.sandbox.gpu.watch.load_burst", lambda key, **kw: contextlib.nullcontext())
    (tmp_path / "p.py").write_text("x = 1\n")
    spec = parse_spec({"name": "clk", "target": {"problem": "p.py", "device": "cuda"},
                       "sandbox": {"clocks": "lock", "clock_targets": {"settle_s": 0}}}, "t.yaml", tmp_path)
    store = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        cid = store.get_or_create_campaign("clk", "kernel", {}).id
        seen: list = []
        runner = setup.open_sandbox(spec, store, cid, lambda k, d: seen.append((k, d)))
        kinds = [e.kind for e in store.events(cid, kinds=("clocks_locked", "clocks_restored"))]
        assert kinds == ["clocks_locked"] and gpu.graphics == 1410
        assert any(k == "sandbox_info" for k, _ in seen)
        # the process dies here without closing the runner (kill -9): the lock stays recorded
        runner.hooks.clear()
        runner.close()
        gpu.calls.clear()
        runner = setup.open_sandbox(spec, store, cid, lambda k, d: seen.append((k, d)))
        evs = store.events(cid, kinds=("clocks_locked", "clocks_restored"))
        assert [e.kind for e in evs] == ["clocks_locked", "clocks_restored", "clocks_locked"]
        assert evs[1].payload["reason"] == "left locked by a run that died"
        assert gpu.calls[0] == ("reset",)  # undone before locking again
        runner.close()
        evs = store.events(cid, kinds=("clocks_locked", "clocks_restored"))
        assert [e.kind for e in evs][-1] == "clocks_restored" and evs[-1].payload["ok"] is True
    finally:
        store.close()


@pytest.mark.gpu
def test_real_gpu_verify_fingerprint():
    g = ClockGuard("verify", "cuda:0")
    g.start()
    fp = g.fingerprint()
    if "gpu_error" in fp:
        pytest.skip(fp["gpu_error"])
    assert fp["gpu_name"] and fp["gpu_uuid"] and fp["gpu_driver"] and fp["gpu_graphics_mhz"]
    assert isinstance(fp["gpu_throttle"], list)

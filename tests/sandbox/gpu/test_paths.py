"""The GPU paths against fakes that behave as the drivers document (tests/sandbox/fakes): one test
per defect of issue 15, each driving the real guard / backends / env gate / images code."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arbor.agents.critic.env_gate import gate_env
from arbor.agents.critic.evidence import CriticConfig, Evidence
from arbor.sandbox.runners import images
from arbor.sandbox.gpu.clocks import ClockGuard, ClockTargets
from arbor.sandbox.gpu.devices import gpu_peak
from arbor.sandbox.gpu.control import AmdSmiBackend, ClockError, NvidiaSmiBackend, NvmlBackend
from arbor.sandbox.gpu.identity import check_identity, device_uuid
from arbor.sandbox.runner import Job, JobResult
from tests.sandbox.fakes import h100_sxm, mi300x

HARNESS = Path(__file__).resolve().parents[3] / "sandbox" / "harness"  # the repository's, not tests/sandbox/


def _guard(m, mode="lock", device="cuda:0", targets=None, backend=NvmlBackend, **kw) -> ClockGuard:
    """The guard with the fake's load burst; hooks the guard does not know are left out, so the
    same test runs (and fails on behaviour, not on a signature) against the code before the fixes."""
    known = {f.name for f in dataclasses.fields(ClockGuard)}
    kw = {k: v for k, v in {"load": m.busy, **kw}.items() if k in known}
    return ClockGuard(mode, device, targets or ClockTargets(settle_s=0), backend_factory=backend,
                      sleep=lambda s: None, **kw)


def _result(timed_out: bool = False) -> JobResult:
    return JobResult(0 if not timed_out else None, timed_out, 1.0, "", "", {})


def _harness_module(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(f"_h_{name}", HARNESS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# 1 ---------------------------------------------------------------------------------------------
def test_defect1_nvidia_smi_guard_locks_the_remapped_gpu_by_uuid(machine, smi_on_path, monkeypatch):
    m = machine()
    exe = smi_on_path(m, "nvidia-smi")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    g = _guard(m, targets=ClockTargets(1410, None, settle_s=0), backend=lambda: NvidiaSmiBackend(exe))
    g.start()
    assert (m.refresh().gpus[0].locked, m.gpus[1].locked) == (None, 1410)
    g.close()
    assert f"-i {m.gpus[1].uuid} --lock-gpu-clocks=1410,1410" in (m.path.parent / "gpus.json.log").read_text()


def test_defect1_guard_holds_the_gpu_the_job_sees_and_a_mismatch_refuses(machine, nvml, monkeypatch):
    m = machine()
    nvml(m)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # CUDA's cuda:0 is physical GPU 1; NVML ignores this
    g = _guard(m, targets=ClockTargets(1410, None, settle_s=0))
    rec = g.start()
    m.refresh()
    assert m.gpus[1].locked == 1410 and m.gpus[0].locked is None
    assert rec["uuid"] == m.gpus[1].uuid and g.key == m.gpus[1].uuid
    fp = g.fingerprint()
    assert fp["gpu_uuid"] == m.gpus[1].uuid and fp["gpu_pci_bus_id"] == m.gpus[1].pci
    check_identity({"device_uuid": m.gpus[1].uuid}, fp)  # the harness ran where the clocks are held
    with pytest.raises(ClockError, match="wrong GPU: the job ran on GPU-00000000"):
        check_identity({"device_uuid": m.gpus[0].uuid}, fp)
    with pytest.raises(ClockError, match="wrong GPU"):  # PCI ids when torch gives no UUID
        check_identity({"device_pci_bus_id": "0000:18:00.0"}, {"gpu_pci_bus_id": m.gpus[1].pci})
    assert device_uuid("cuda") == m.gpus[1].uuid  # what Docker's device_requests get
    from arbor.sandbox.runners.docker import DockerRunner

    runner = object.__new__(DockerRunner)
    runner.device = "cuda"
    assert runner._device_requests()[0]["DeviceIDs"] == [m.gpus[1].uuid]
    g.close()
    assert m.refresh().gpus[1].locked is None


# 2 ---------------------------------------------------------------------------------------------
def test_defect2_a_lock_the_driver_ignores_fails_under_load(machine, nvml):
    m = machine(ignore_lock=True)  # the call succeeds, nothing changes: idle reads 345 MHz + GpuIdle
    nvml(m)
    restored = []
    g = _guard(m, targets=ClockTargets(1410, None, settle_s=0), on_restore=lambda r: restored.append(r["reason"]))
    with pytest.raises(ClockError, match=r"graphics 1980 MHz \(want 1410±50\).*did not hold the lock under load"):
        g.start()
    assert restored and g.locked is None


def test_defect2_throttling_during_the_job_is_sampled_and_gated(machine, nvml):
    m = machine([h100_sxm(0, power_cap_mhz=1500)])  # tensor-core load hits the power cap
    nvml(m)
    g = _guard(m, mode="verify", sample_interval_s=0.01)
    g.start()
    job, res = Job(["true"], {}, 10), _result()
    g.before(job)
    with m.busy():
        time.sleep(0.3)
    g.after(job, res)
    fp = res.fingerprint
    assert fp["gpu_throttle"] == ["gpu_idle"] and fp["gpu_throttled"] is False  # the end reading sees nothing
    assert fp["gpu_sampled"]["throttled"] and fp["gpu_sampled"]["busy_samples"] > 0
    assert fp["gpu_sampled"]["throttle_reasons"] & 0x4 and fp["gpu_sampled"]["violation_ms"]["power"] > 0
    ev = Evidence(is_root=False, attempt=1, purpose="primary", status="ok", error_class=None,
                  error_text=None, correctness=[], fingerprint=fp, baseline_fingerprint=dict(fp))
    out = gate_env(ev, None, CriticConfig())
    assert out.decision == "remeasure" and "SwPowerCap (during the job)" in out.reason


# 3 ---------------------------------------------------------------------------------------------
def test_defect3_default_lock_is_a_sustainable_clock_not_max_boost(machine, nvml, smi_on_path):
    m = machine([h100_sxm(0, power_cap_mhz=1755)])  # default applications clock == max boost 1980
    nvml(m)
    rec = _guard(m).start()
    assert m.refresh().gpus[0].locked == "tdp"
    assert rec["graphics_source"].startswith("TDP clock") and rec["graphics_mhz"] == 1590
    assert rec["under_load"]["throttle"] == []
    m.gpus[0].locked = None
    m.save()
    exe = smi_on_path(m, "nvidia-smi")  # no TDP id through the CLI: say what to set instead
    with pytest.raises(ClockError, match="default applications clock is max boost .* base clock"):
        _guard(m, backend=lambda: NvidiaSmiBackend(exe)).start()


# 4 ---------------------------------------------------------------------------------------------
def test_defect4_refused_lock_names_the_operation_and_the_real_fix(machine, nvml, smi_on_path):
    m = machine(root=False)
    exe = smi_on_path(m, "nvidia-smi")
    with pytest.raises(ClockError) as exc:
        NvidiaSmiBackend(exe).lock(0, 1410, None)
    msg = str(exc.value)
    assert "--lock-gpu-clocks=1410,1410" in msg and "not permitted for the current user" in msg
    assert "permission denied" in msg and "CAP_SYS_ADMIN" in msg and "clocks: verify" in msg
    assert "Terminating early" not in msg and "-acp" not in msg and "\n" not in msg
    nvml(m)
    with pytest.raises(ClockError, match="permission denied") as exc:
        _guard(m, targets=ClockTargets(1410, None, settle_s=0)).start()
    assert "-acp" not in str(exc.value)


# 5 ---------------------------------------------------------------------------------------------
def test_defect5_restore_puts_back_the_admins_application_clocks(machine, nvml):
    m = machine(mem_lock_supported=False)  # pre-Ampere memory: the lock goes through app clocks
    m.gpus[0].app_mhz, m.gpus[0].app_mem_mhz = 1200, 2619  # an admin's setting
    m.save()
    nvml(m)
    g = _guard(m, targets=ClockTargets(1410, 2619, settle_s=0))
    rec = g.start()
    assert m.refresh().gpus[0].app_mhz == 1410 and rec["saved"]["app_graphics_mhz"] == 1200
    g.close()
    m.refresh()
    assert (m.gpus[0].locked, m.gpus[0].app_mhz, m.gpus[0].app_mem_mhz) == (None, 1200, 2619)


def test_defect5_stale_restore_by_uuid_and_never_a_live_owners_lock(machine, nvml, tmp_path):
    from arbor.campaign.sandbox_setup import restore_stale_clocks
    from arbor.search_tree import open_store
    import socket

    m = machine()
    m.gpus[1].locked = 1410
    m.save()
    nv = nvml(m)
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        cid = store.get_or_create_campaign("c", "kernel", {}).id
        base = {"backend": "nvml", "host": socket.gethostname(), "index": "0", "saved": {}}
        store.append_event(cid, "clocks_locked", {**base, "uuid": m.gpus[1].uuid, "pid": live.pid}, agent="sandbox")
        assert restore_stale_clocks(store, cid, NvmlBackend, lambda k, d: None) == 0  # its owner runs
        assert m.refresh().gpus[1].locked == 1410
        live.kill()
        live.wait()
        assert restore_stale_clocks(store, cid, NvmlBackend, lambda k, d: None) == 1
        assert m.refresh().gpus[1].locked is None  # the recorded GPU, although "index" says 0
        assert not [c for c in nv.calls if c[0].startswith("reset") and c[1] == m.gpus[0].uuid]
    finally:
        live.kill()
        live.wait()
        store.close()


# 6 ---------------------------------------------------------------------------------------------
def test_defect6_amd_locks_stable_clocks_by_pci_address_and_reads_the_right_fields(machine, smi_on_path):
    m = machine([mi300x(0), mi300x(1)])
    exe = smi_on_path(m, "amd-smi")
    st = AmdSmiBackend(exe).state(1)
    assert st.driver == "6.8.5"  # not the VBIOS version listed before it
    assert st.temperature_c == 52.0  # the hotspot: MI300X reports no edge temperature
    assert st.pci_bus_id == m.gpus[1].pci and st.idle  # zero activity: idle, though no NVML bits
    g = _guard(m, device="cuda", backend=lambda: AmdSmiBackend(exe), env={"HIP_VISIBLE_DEVICES": "1"})
    rec = g.start()  # an idle MI300X is not a failed lock: verified under load
    m.refresh()
    assert (m.gpus[0].perf_level, m.gpus[1].perf_level) == ("AUTO", "STABLE_STD")
    assert rec["graphics_mhz"] == 1300 and g.key == m.gpus[1].pci
    g.close()
    calls = (m.path.parent / "gpus.json.log").read_text()
    assert f"set -g {m.gpus[1].pci} --perf-level STABLE_STD" in calls and "--perf-determinism" not in calls
    assert m.refresh().gpus[1].perf_level == "AUTO"
    with pytest.raises(ClockError, match="soft maximum"):
        AmdSmiBackend(exe).lock(0, 1500, None)
    m.root = False
    m.save()
    with pytest.raises(ClockError, match="amd-smi set -g .* permission denied .*CAP_SYS_ADMIN"):
        AmdSmiBackend(exe).lock(0, None, None)


# 7 ---------------------------------------------------------------------------------------------
def test_defect7_cache_flush_is_twice_the_last_level_cache():
    timing = _harness_module("timing")
    assert timing.flush_bytes("AMD Instinct MI300X", 4 << 20) >= 512 << 20  # 256 MB Infinity Cache
    assert timing.flush_bytes("AMD Instinct MI325X", 4 << 20) >= 512 << 20
    assert timing.flush_bytes("NVIDIA H100 80GB HBM3", 50 << 20) >= 100 << 20
    assert timing.flush_bytes("NVIDIA B200", 126 << 20) >= 252 << 20


# 8 ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fault", ["process", "xid", "sanity"])
def test_defect8_after_a_timeout_kill_the_gpu_must_prove_healthy(machine, nvml, fault):
    m = machine()
    nvml(m)
    g = _guard(m, mode="verify", sanity=lambda key: "a sanity kernel failed (wrong)" if fault == "sanity" else None)
    g.start()
    job = Job(["true"], {}, 10)
    g.before(job)
    if fault == "process":
        m.gpus[0].procs = [4242]  # the killed job's context is still on the GPU
    if fault == "xid":
        m.gpus[0].xids = [79]  # GPU has fallen off the bus
    m.save()
    res = _result(timed_out=True)
    g.after(job, res)
    why = res.fingerprint["gpu_unhealthy"]
    assert {"process": "[4242] of the killed job", "xid": "Xid error(s) [79]", "sanity": "sanity kernel failed"}[fault] in why
    with pytest.raises(ClockError, match="GPU unhealthy: .* reset the GPU"):
        g.before(job)
    g.close()


def test_defect8_a_clean_timeout_leaves_the_gpu_usable(machine, nvml):
    m = machine()
    nvml(m)
    g = _guard(m, mode="verify", sanity=lambda key: None)
    g.start()
    job = Job(["true"], {}, 10)
    g.before(job)
    res = _result(timed_out=True)
    g.after(job, res)
    assert "gpu_unhealthy" not in res.fingerprint
    g.before(job)
    g.after(job, _result())
    g.close()


# 9 ---------------------------------------------------------------------------------------------
def test_defect9_images_start_with_the_nvidia_hook_and_build_cuda_candidates(tmp_path, monkeypatch):
    from arbor.sandbox.runners.docker import DockerRunner, gpu_support

    assert "/etc/ld.so.cache" not in [dst for _src, dst in images.host_mounts()]
    if os.path.exists("/etc/ld.so.cache"):
        import io
        import tarfile

        names = tarfile.open(fileobj=io.BytesIO(images._host_context())).getnames()
        assert "rootfs/etc/ld.so.cache" in names  # a copy in the image: ldconfig may rewrite it
    runner = object.__new__(DockerRunner)
    runner.device, runner.plan = "cuda", images.resolve_image("host")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/local/cuda/lib64")
    assert runner._env("/work/j", Job(["x"], {}, 1))["LD_LIBRARY_PATH"] == "/usr/local/cuda/lib64"
    cuda = (images.DOCKERFILES / "Dockerfile.cuda").read_text()
    base = [ln for ln in cuda.splitlines() if ln.startswith("ARG BASE=")][0]
    assert "-devel-" in base and "ninja" in cuda  # nvcc, headers and ninja for load_inline
    hook = tmp_path / "nvidia-container-runtime-hook"
    hook.write_text("#!/bin/sh\n")
    hook.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")  # on Arbor's PATH, not dockerd's

    class Engine:
        def __init__(self, info):  # type: ignore[no-untyped-def]
            self._info = info

        def info(self):  # type: ignore[no-untyped-def]
            return self._info

    assert gpu_support(Engine({"Runtimes": {"runc": {}}})) is False
    assert gpu_support(Engine({"Runtimes": {"runc": {}, "nvidia": {}}})) is True
    assert gpu_support(Engine({"DiscoveredDevices": [{"Source": "cdi", "ID": "nvidia.com/gpu=all"}]})) is True


# 10 --------------------------------------------------------------------------------------------
def test_defect10_nvidia_smi_memory_fallback_mig_and_event_reasons(machine, smi_on_path):
    m = machine([h100_sxm(0, mig=["MIG-11111111-0000", "MIG-22222222-0000"]), h100_sxm(1)],
                mem_lock_supported=False)
    exe = smi_on_path(m, "nvidia-smi")
    b = NvidiaSmiBackend(exe)
    assert b.count() == 2  # MIG devices are not GPUs
    st = b.state(m.gpus[0].uuid)  # this driver knows only clocks_event_reasons.active
    assert st.throttle_reasons == 0x1 and st.pci_bus_id == m.gpus[0].pci
    saved = b.save(0)
    b.lock(0, 1410, 1593, saved=saved)
    m.refresh()
    assert (m.gpus[0].locked, m.gpus[0].app_mem_mhz, m.gpus[0].app_mhz) == (1410, 1593, 1410)
    b.restore(0, saved)
    m.refresh()  # the application clocks that were in effect before (here the defaults) are back
    assert (m.gpus[0].app_mhz or 1980, m.gpus[0].app_mem_mhz or 2619, m.gpus[0].locked) == (1980, 2619, None)
    old = machine(old_field_names=True)  # a driver from before the rename
    old_exe = smi_on_path(old, "nvidia-smi")
    assert NvidiaSmiBackend(old_exe).state(0).throttle_reasons == 0x1
    with pytest.raises(ClockError, match="MIG instance .* whole GPU"):
        _guard(m, device="cuda", backend=lambda: NvidiaSmiBackend(exe),
               env={"CUDA_VISIBLE_DEVICES": "MIG-11111111-0000"}).start()


# 11 --------------------------------------------------------------------------------------------
def test_defect11_speed_of_light_matches_the_exact_variant():
    assert gpu_peak("NVIDIA GH200 480GB").name == "GH200"
    assert gpu_peak("NVIDIA GB200").name == "GB200"
    assert gpu_peak("NVIDIA H800").name == "H800 SXM" and gpu_peak("NVIDIA H800").bytes_per_s == 3.35e12
    assert gpu_peak("AMD Instinct MI325X").bytes_per_s == 6.0e12
    assert gpu_peak("NVIDIA H100 80GB HBM3").bytes_per_s == 3.35e12
    assert gpu_peak("NVIDIA H100 PCIe").bytes_per_s == 2.0e12
    assert gpu_peak("NVIDIA H100 NVL").bytes_per_s == 3.9e12
    assert gpu_peak("NVIDIA H200").name == "H200" and gpu_peak("NVIDIA B200").name == "B200"


# the harness's own GPU readings against the same fakes ------------------------------------------
def test_harness_fingerprint_reads_nvml_and_nvidia_smi_fakes(machine, nvml, smi_on_path):
    fpr = _harness_module("fingerprint")
    m = machine()
    nvml(m)
    with m.busy():
        st = fpr._nvml_state(0, m.gpus[1].uuid)
    assert st["sm_clock_mhz"] == 1980 and st["throttle_reasons"] == 0 and st["source"] == "nvml"
    smi_on_path(m, "nvidia-smi")
    st = fpr._smi_state(0, m.gpus[1].uuid)
    assert st["sm_clock_mhz"] == 345 and st["throttle_reasons"] == 0x1 and st["source"] == "nvidia-smi"

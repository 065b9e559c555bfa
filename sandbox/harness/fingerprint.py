"""Where the numbers came from: the environment fingerprint the Critic's env_drift gate compares.

Standalone (stdlib + torch; NVML through ``pynvml`` when it is importable, else ``nvidia-smi``):
shipped beside the harness and loaded by path. Static facts (host, CPU model, device, driver,
thread count) are read once; dynamic GPU state (clocks, throttle reasons, temperature) is read
before and after timing, because locked clocks still throttle at the power limit.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys

import torch

try:
    from . import cpu_facts  # imported as arbor.sandbox.harness.fingerprint (the host's tests)
except ImportError:  # shipped into the job and loaded by path: the sibling beside this file
    import importlib.util

    _spec = importlib.util.spec_from_file_location(
        "arbor_harness_cpu_facts", os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpu_facts.py"))
    cpu_facts = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
    _spec.loader.exec_module(cpu_facts)  # type: ignore[union-attr]

# NVML clocks-event (throttle) reasons that mean "slower than the locked clocks": SwPowerCap,
# HwSlowdown, SwThermal, HwThermal, HwPowerBrake. Idle (0x1) and app-clock settings (0x2) are not.
BAD_THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


def fingerprint(device: str) -> dict:
    """Static facts; timings are never comparable across machines (or thread counts)."""
    fp = {
        "host": socket.gethostname(), "platform": platform.platform(),
        "python": platform.python_version(), "torch": torch.__version__,
        "cpu_model": cpu_facts.cpu_model(),
        "cpu_count": os.cpu_count(), "cpu_affinity": len(os.sched_getaffinity(0)),
        "governor": cpu_facts.read(cpu_facts.GOVERNOR),
        "cpu_max_khz": cpu_facts.read(cpu_facts.MAX_KHZ),
        "num_threads": torch.get_num_threads(), "device": device,
        # pinned by the harness before torch was imported (allocator.py)
        "host_allocator": getattr(sys.modules.get("arbor_harness_allocator"), "answer", "not pinned"),
    }
    fp["device_name"] = fp["cpu_model"] or platform.machine()
    if device.startswith("cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.device(device).index or 0)
        driver = cpu_facts.read("/proc/driver/nvidia/version")
        fp.update(device_name=props.name, gpu_name=props.name, cuda_runtime=torch.version.cuda,
                  gpu_capability=f"{props.major}.{props.minor}", gpu_sms=props.multi_processor_count,
                  gpu_memory_bytes=props.total_memory,
                  gpu_l2_bytes=getattr(props, "L2_cache_size", None),
                  gpu_driver=driver.splitlines()[0] if driver else None)
        # which physical GPU this process ran on: the runner compares it with the GPU it held
        fp["device_uuid"] = _uuid(torch.device(device).index or 0)
        bus = [getattr(props, k, None) for k in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
        if None not in bus:
            fp["device_pci_bus_id"] = f"{bus[0]:04x}:{bus[1]:02x}:{bus[2]:02x}.0"
    return fp


def _uuid(index: int) -> str | None:
    """The GPU's UUID: CUDA_VISIBLE_DEVICES renumbers devices, NVML and nvidia-smi do not."""
    try:
        u = str(torch.cuda.get_device_properties(index).uuid)
    except (AttributeError, RuntimeError):
        return None
    return u if u.startswith("GPU-") else f"GPU-{u}"


def _nvml_state(index: int, uuid: str | None) -> dict | None:
    try:
        import pynvml  # noqa: PLC0415  optional: nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        h = (pynvml.nvmlDeviceGetHandleByUUID(uuid.encode()) if uuid
             else pynvml.nvmlDeviceGetHandleByIndex(index))
        get_reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        return {
            "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "throttle_reasons": int(get_reasons(h)),
            "temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
            "source": "nvml",
        }
    except Exception:  # noqa: BLE001  NVML missing or no permission: fall back
        return None


def _smi_state(index: int, uuid: str | None) -> dict | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    out: list[str] = []
    # clocks_event_reasons is the current name; drivers from before the rename know only the old one
    for reasons_field in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):
        query = f"clocks.sm,clocks.mem,{reasons_field},temperature.gpu,power.draw"
        try:
            out = subprocess.run([exe, f"--id={uuid or index}", f"--query-gpu={query}",
                                  "--format=csv,noheader,nounits"], capture_output=True, text=True,
                                 timeout=10, check=False).stdout.strip().splitlines()
        except (OSError, subprocess.SubprocessError):
            return None
        if out and "not a valid field" not in out[0]:
            break
    try:
        sm, mem, reasons, temp, power = [v.strip() for v in out[0].split(",")]
        return {"sm_clock_mhz": int(float(sm)), "mem_clock_mhz": int(float(mem)),
                "throttle_reasons": int(reasons, 16) if reasons.startswith("0x") else int(reasons),
                "temperature_c": int(float(temp)), "power_w": float(power), "source": "nvidia-smi"}
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def gpu_state(device: str) -> dict:
    """Clocks and throttle reasons now; ``{}`` on CPU or where neither NVML nor nvidia-smi works."""
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return {}
    index = torch.device(device).index or 0
    if torch.version.hip:  # ROCm: nothing portable here yet; the device table still applies
        return {}
    uuid = _uuid(index)
    return _nvml_state(index, uuid) or _smi_state(index, uuid) or {}

"""GPU control backends: read the state that decides a measurement's validity, lock and reset clocks.

Three ways in, tried in order by ``open_backend``: NVML (``nvidia-ml-py``; the fast, precise one),
the ``nvidia-smi`` CLI (same driver, no Python bindings needed), and ``amd-smi`` on AMD. Every
failure is a ``ClockError`` whose message is one line naming the cause and the fix — a machine
without a GPU gets "NVML: library not found ... (no NVIDIA driver here)", never a traceback.

Indices are PCI-bus order (NVML's); jobs run with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so CUDA's
``cuda:N`` is NVML's device N.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from typing import Protocol

from .runner import SandboxError

__all__ = ["ClockError", "GpuBackend", "NvmlBackend", "NvidiaSmiBackend", "AmdSmiBackend",
           "open_backend", "THROTTLE_BITS", "BAD_THROTTLE_MASK", "decode_throttle"]

# NVML clocks-event (throttle) reasons (locked clocks still throttle at the power limit).
THROTTLE_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
                 0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal", 0x40: "hw_thermal",
                 0x80: "hw_power_brake", 0x100: "display_clock_setting"}
BAD_THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


class ClockError(SandboxError):
    """Clock control or GPU state is unavailable or refused; one line with the fix."""


def decode_throttle(mask: int | None) -> list[str]:
    if not mask:
        return []
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit]


@dataclass
class GpuState:
    index: int
    name: str | None = None
    uuid: str | None = None
    driver: str | None = None
    graphics_mhz: int | None = None
    memory_mhz: int | None = None
    sm_mhz: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    throttle_reasons: int | None = None

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["throttle"] = decode_throttle(self.throttle_reasons)
        return d


class GpuBackend(Protocol):
    name: str

    def count(self) -> int: ...

    def state(self, index: int) -> GpuState: ...

    def default_targets(self, index: int) -> tuple[int | None, int | None]: ...

    def lock(self, index: int, graphics_mhz: int | None, memory_mhz: int | None) -> None: ...

    def reset(self, index: int) -> None: ...


def _permission_fix(what: str) -> str:
    return (f"{what}: permission denied — locking clocks needs root (or an admin's "
            "`nvidia-smi -acp UNRESTRICTED`); run as root or use sandbox.clocks: verify")


class NvmlBackend:
    """NVML through nvidia-ml-py. Locking uses the *locked clocks* API (Volta+ graphics,
    Ampere+ memory); older memory controllers fall back to application clocks."""

    name = "nvml"

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError:
            raise ClockError("NVML: nvidia-ml-py is not installed — pip install 'arbor-opt[gpu]'") from None
        self.nv = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise ClockError(f"NVML: {self._why(exc)}") from None

    def _why(self, exc: Exception) -> str:
        nv = self.nv
        if isinstance(exc, getattr(nv, "NVMLError_LibraryNotFound", ())):
            return "library not found (no NVIDIA driver on this machine)"
        if isinstance(exc, getattr(nv, "NVMLError_DriverNotLoaded", ())):
            return "the NVIDIA driver is not loaded"
        if isinstance(exc, getattr(nv, "NVMLError_NoPermission", ())):
            return "no permission"
        return str(exc) or type(exc).__name__

    def _h(self, index: int):  # type: ignore[no-untyped-def]
        try:
            return self.nv.nvmlDeviceGetHandleByIndex(index)
        except self.nv.NVMLError as exc:
            raise ClockError(f"NVML: GPU {index}: {self._why(exc)} — check sandbox/target device") from None

    def _try(self, fn, *args):  # type: ignore[no-untyped-def]
        try:
            return fn(*args)
        except self.nv.NVMLError:
            return None

    def count(self) -> int:
        return int(self.nv.nvmlDeviceGetCount())

    def state(self, index: int) -> GpuState:
        nv, h = self.nv, self._h(index)
        reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            nv.nvmlDeviceGetCurrentClocksThrottleReasons
        power = self._try(nv.nvmlDeviceGetPowerUsage, h)
        name, uuid, driver = (self._try(nv.nvmlDeviceGetName, h), self._try(nv.nvmlDeviceGetUUID, h),
                              self._try(nv.nvmlSystemGetDriverVersion))
        dec = (lambda v: v.decode() if isinstance(v, bytes) else v)  # noqa: E731 - old bindings return bytes
        return GpuState(
            index=index, name=dec(name), uuid=dec(uuid), driver=dec(driver),
            graphics_mhz=self._try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_GRAPHICS),
            memory_mhz=self._try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
            sm_mhz=self._try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
            temperature_c=self._try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
            power_w=power / 1000.0 if power is not None else None,
            throttle_reasons=self._try(reasons, h),
        )

    def default_targets(self, index: int) -> tuple[int | None, int | None]:
        """The default application (base) graphics clock — sustainable without power throttling —
        and the top memory clock (memory has one useful P0 clock)."""
        nv, h = self.nv, self._h(index)
        g = self._try(nv.nvmlDeviceGetDefaultApplicationsClock, h, nv.NVML_CLOCK_GRAPHICS)
        m = self._try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM)
        return g, m

    def lock(self, index: int, graphics_mhz: int | None, memory_mhz: int | None) -> None:
        nv, h = self.nv, self._h(index)
        try:
            if graphics_mhz is not None:
                nv.nvmlDeviceSetGpuLockedClocks(h, graphics_mhz, graphics_mhz)
            if memory_mhz is not None:
                try:
                    nv.nvmlDeviceSetMemoryLockedClocks(h, memory_mhz, memory_mhz)
                except (nv.NVMLError_NotSupported, AttributeError):
                    g = graphics_mhz or self.state(index).graphics_mhz
                    nv.nvmlDeviceSetApplicationsClocks(h, memory_mhz, g)
        except nv.NVMLError_NoPermission:
            raise ClockError(_permission_fix(f"NVML: GPU {index}")) from None
        except nv.NVMLError as exc:
            raise ClockError(f"NVML: GPU {index}: cannot lock clocks at {graphics_mhz}/{memory_mhz} MHz: "
                             f"{self._why(exc)} — pick supported values (nvidia-smi -q -d SUPPORTED_CLOCKS)") from None

    def reset(self, index: int) -> None:
        nv, h = self.nv, self._h(index)
        for fn in ("nvmlDeviceResetGpuLockedClocks", "nvmlDeviceResetMemoryLockedClocks",
                   "nvmlDeviceResetApplicationsClocks"):
            try:
                getattr(nv, fn)(h)
            except nv.NVMLError_NoPermission:
                raise ClockError(_permission_fix(f"NVML: GPU {index} reset")) from None
            except (nv.NVMLError, AttributeError):
                pass


def _run(argv: list[str], timeout: float = 20) -> str:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ClockError(f"{argv[0]}: cannot run ({exc})") from None
    if r.returncode != 0:
        msg = (r.stderr or r.stdout).strip().splitlines()
        text = msg[-1] if msg else f"exit code {r.returncode}"
        if "permission" in text.lower() or "insufficient" in text.lower() or "root" in text.lower():
            raise ClockError(_permission_fix(f"{argv[0]} {' '.join(argv[1:3])}"))
        raise ClockError(f"{argv[0]} {' '.join(argv[1:3])}: {text}")
    return r.stdout


def _num(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None


class NvidiaSmiBackend:
    """The nvidia-smi CLI: the fallback where nvidia-ml-py is missing."""

    name = "nvidia-smi"
    _FIELDS = ("name,uuid,driver_version,clocks.gr,clocks.mem,clocks.sm,temperature.gpu,power.draw,"
               "clocks_throttle_reasons.active,clocks.default_applications.graphics,clocks.max.memory")

    def __init__(self, exe: str | None = None) -> None:
        self.exe = exe or shutil.which("nvidia-smi")
        if self.exe is None:
            raise ClockError("nvidia-smi: not found (no NVIDIA driver on this machine)")

    def _query(self, index: int) -> list[str]:
        out = _run([self.exe, "-i", str(index), f"--query-gpu={self._FIELDS}", "--format=csv,noheader,nounits"])
        return [v.strip() for v in out.strip().splitlines()[0].split(",")]

    def count(self) -> int:
        return len(_run([self.exe, "-L"]).strip().splitlines())

    def state(self, index: int) -> GpuState:
        f = self._query(index)
        n = [_num(v) for v in f]
        reasons = int(f[8], 16) if f[8].startswith("0x") else (int(n[8]) if n[8] is not None else None)
        return GpuState(index=index, name=f[0], uuid=f[1], driver=f[2],
                        graphics_mhz=int(n[3]) if n[3] is not None else None,
                        memory_mhz=int(n[4]) if n[4] is not None else None,
                        sm_mhz=int(n[5]) if n[5] is not None else None,
                        temperature_c=n[6], power_w=n[7], throttle_reasons=reasons)

    def default_targets(self, index: int) -> tuple[int | None, int | None]:
        n = [_num(v) for v in self._query(index)]
        return (int(n[9]) if n[9] else None, int(n[10]) if n[10] else None)

    def lock(self, index: int, graphics_mhz: int | None, memory_mhz: int | None) -> None:
        if graphics_mhz is not None:
            _run([self.exe, "-i", str(index), f"--lock-gpu-clocks={graphics_mhz},{graphics_mhz}"])
        if memory_mhz is not None:
            _run([self.exe, "-i", str(index), f"--lock-memory-clocks={memory_mhz},{memory_mhz}"])

    def reset(self, index: int) -> None:
        _run([self.exe, "-i", str(index), "--reset-gpu-clocks"])
        try:
            _run([self.exe, "-i", str(index), "--reset-memory-clocks"])
        except ClockError:
            pass  # pre-Ampere: no memory lock to undo


def _walk(obj, *keys):  # type: ignore[no-untyped-def]
    """First value under any of ``keys`` anywhere in amd-smi's JSON (its layout moves between
    ROCm releases; the names do not)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in keys:
                return v
        for v in obj.values():
            found = _walk(v, *keys)
            if found is not None:
                return found
    elif isinstance(obj, list):
        for v in obj:
            found = _walk(v, *keys)
            if found is not None:
                return found
    return None


def _mhz(v) -> int | None:  # type: ignore[no-untyped-def]
    if isinstance(v, dict):
        v = v.get("value", v.get("clk"))
    n = _num(str(v).split()[0]) if v is not None else None
    return int(n) if n is not None else None


class AmdSmiBackend:
    """AMD GPUs through ``amd-smi``: determinism mode pins the graphics clock (SCLK)."""

    name = "amd-smi"

    def __init__(self, exe: str | None = None) -> None:
        self.exe = exe or shutil.which("amd-smi")
        if self.exe is None:
            raise ClockError("amd-smi: not found (no ROCm on this machine)")

    def _json(self, *args: str):  # type: ignore[no-untyped-def]
        try:
            return json.loads(_run([self.exe, *args, "--json"]))
        except ValueError:
            raise ClockError(f"amd-smi {' '.join(args)}: output is not JSON — upgrade ROCm") from None

    def count(self) -> int:
        data = self._json("list")
        return len(data) if isinstance(data, list) else 1

    def state(self, index: int) -> GpuState:
        static, metric = self._json("static", "-g", str(index)), self._json("metric", "-g", str(index))
        gfx = _walk(metric, "gfx_0", "GFX_0", "sclk")
        return GpuState(index=index, name=_walk(static, "market_name", "asic_name"),
                        uuid=_walk(static, "asic_serial", "uuid"), driver=_walk(static, "driver_version", "version"),
                        graphics_mhz=_mhz(_walk(gfx, "clk") if isinstance(gfx, dict) else gfx),
                        memory_mhz=_mhz(_walk(_walk(metric, "mem_0", "MEM_0", "mclk"), "clk")),
                        temperature_c=_num(str(_mhz(_walk(metric, "hotspot", "edge")) or "")),
                        power_w=_num(str(_mhz(_walk(metric, "socket_power", "average_socket_power")) or "")),
                        throttle_reasons=None)

    def default_targets(self, index: int) -> tuple[int | None, int | None]:
        return None, None  # determinism mode needs an explicit SCLK

    def lock(self, index: int, graphics_mhz: int | None, memory_mhz: int | None) -> None:
        if graphics_mhz is None:
            raise ClockError("amd-smi: sandbox.clock_targets.graphics_mhz is required to lock AMD clocks")
        _run([self.exe, "set", "-g", str(index), "--perf-determinism", str(graphics_mhz)])

    def reset(self, index: int) -> None:
        _run([self.exe, "reset", "-g", str(index), "--perf-determinism"])


def open_backend(prefer: str = "auto") -> GpuBackend:
    """The first backend that works, or a ClockError listing why each one did not."""
    order = {"auto": (NvmlBackend, NvidiaSmiBackend, AmdSmiBackend), "nvml": (NvmlBackend,),
             "nvidia-smi": (NvidiaSmiBackend,), "amd-smi": (AmdSmiBackend,)}.get(prefer)
    if order is None:
        raise ClockError(f"unknown GPU backend {prefer!r}: use auto, nvml, nvidia-smi or amd-smi")
    reasons = []
    for cls in order:
        try:
            return cls()
        except ClockError as exc:
            reasons.append(str(exc))
    raise ClockError("no GPU control: " + "; ".join(reasons))

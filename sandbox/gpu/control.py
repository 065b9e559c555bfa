"""GPU control backends: read the state that decides a measurement's validity, lock and restore clocks.

Three ways in, tried in order by ``open_backend``: NVML (``nvidia-ml-py``; the fast, precise one),
the ``nvidia-smi`` CLI (same driver, no Python bindings needed), and ``amd-smi`` on AMD (the two
CLIs live in ``smi``). Every failure is a ``ClockError`` whose message is one line naming the
cause and the fix — a machine without a GPU gets "NVML: library not found ... (no NVIDIA driver
here)", never a traceback.

Devices are addressed by key (see ``state``): NVML handles come from the UUID or the PCI bus
id, never from an index that ``CUDA_VISIBLE_DEVICES`` may have renumbered.
"""

from __future__ import annotations

from typing import Protocol

from .smi import AmdSmiBackend, NvidiaSmiBackend
from .state import (BAD_THROTTLE_MASK, THROTTLE_BITS, ClockError, GpuState, decode_throttle,
                        is_pci_bus_id, permission_fix)

__all__ = ["ClockError", "GpuBackend", "GpuState", "NvmlBackend", "NvidiaSmiBackend", "AmdSmiBackend",
           "open_backend", "THROTTLE_BITS", "BAD_THROTTLE_MASK", "decode_throttle", "TDP"]

TDP = "tdp"  # a lock target: the clock the GPU sustains within its power limit (NVML's TDP limit id)
_TDP_ID = 0xFFFFFF01  # NVML_CLOCK_LIMIT_ID_TDP (nvmlClockLimitId_t), for bindings that lack the name
# Xid codes after which the GPU should not be trusted without a reset (NVIDIA's Xid catalogue):
# 13 graphics engine exception, 31 MMU fault, 43 GPU stopped processing, 45 preemptive cleanup,
# 48 double-bit ECC, 61/62 internal microcontroller, 63/64 row remapping, 74 NVLink, 79 fallen off
# the bus, 92 high single-bit ECC rate, 94/95 contained/uncontained ECC, 119/120 GSP errors.
CRITICAL_XIDS = {13, 31, 43, 45, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120}


class GpuBackend(Protocol):
    """What the clock guard needs. ``save``/``restore``, ``processes`` and ``xid_errors`` are
    optional: the guard falls back to ``reset`` and skips the checks a backend cannot do."""

    name: str

    def count(self) -> int: ...

    def state(self, key) -> GpuState: ...  # type: ignore[no-untyped-def]

    # optional: ``quick_state(key)`` — only what changes from moment to moment (clocks, clock-event
    # reasons, violation counters), for per-job checks and the sampler; the guard uses ``state``
    # where a backend has no cheaper reading (a CLI answers everything in one process start)

    def default_targets(self, key) -> tuple: ...  # type: ignore[no-untyped-def]  (g, m[, source])

    def lock(self, key, graphics_mhz, memory_mhz) -> None: ...  # type: ignore[no-untyped-def]

    def reset(self, key) -> None: ...  # type: ignore[no-untyped-def]


class NvmlBackend:
    """NVML through nvidia-ml-py. Locking uses the *locked clocks* API (Volta+ graphics,
    Ampere+ memory); where memory locking is unsupported, application clocks carry the memory
    clock, and ``restore`` puts back the application clocks that were there before."""

    name = "nvml"

    def __init__(self) -> None:
        try:
            import pynvml
        except ImportError:
            raise ClockError("NVML: nvidia-ml-py is not installed — pip install 'arbor-opt[gpu]'") from None
        self.nv = pynvml
        self._events: dict = {}
        self._handles: dict = {}  # key -> handle: valid until nvmlShutdown, and a UUID lookup is not free
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
        if isinstance(exc, getattr(nv, "NVMLError_NotFound", ())):
            return "no such GPU"
        return str(exc) or type(exc).__name__

    def _h(self, key):  # type: ignore[no-untyped-def]
        h = self._handles.get(key)
        if h is None:
            h = self._handles[key] = self._lookup(key)
        return h

    def _lookup(self, key):  # type: ignore[no-untyped-def]
        nv = self.nv
        try:
            if isinstance(key, str) and key.startswith("MIG-"):
                # clocks, power and throttling belong to the whole GPU the MIG instance is part of
                return nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nv.nvmlDeviceGetHandleByUUID(key))
            if isinstance(key, str) and key.startswith("GPU-"):
                return nv.nvmlDeviceGetHandleByUUID(key)
            if is_pci_bus_id(key):
                by_pci = getattr(nv, "nvmlDeviceGetHandleByPciBusId_v2", None) or nv.nvmlDeviceGetHandleByPciBusId
                return by_pci(key)
            return nv.nvmlDeviceGetHandleByIndex(int(key))
        except (nv.NVMLError, ValueError) as exc:
            raise ClockError(f"NVML: GPU {key}: {self._why(exc)} — check target.device and "
                             "CUDA_VISIBLE_DEVICES (nvidia-smi -L lists UUIDs)") from None

    def _try(self, fn, *args):  # type: ignore[no-untyped-def]
        try:
            return fn(*args)
        except (self.nv.NVMLError, AttributeError):
            return None

    def count(self) -> int:
        return int(self.nv.nvmlDeviceGetCount())

    def quick_state(self, key) -> GpuState:  # type: ignore[no-untyped-def]
        """Clocks, clock-event reasons and violation counters only: six queries, what a per-job
        check and the sampler need (``state`` adds identity, temperature and power)."""
        nv, h = self.nv, self._h(key)
        reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            nv.nvmlDeviceGetCurrentClocksThrottleReasons
        viol = {}
        for what, policy in (("power", getattr(nv, "NVML_PERF_POLICY_POWER", 0)),
                             ("thermal", getattr(nv, "NVML_PERF_POLICY_THERMAL", 1))):
            v = self._try(getattr(nv, "nvmlDeviceGetViolationStatus", None), h, policy)
            if v is not None:
                viol[what] = int(v.violationTime)
        return GpuState(
            index=key, graphics_mhz=self._try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_GRAPHICS),
            memory_mhz=self._try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
            sm_mhz=self._try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
            throttle_reasons=self._try(reasons, h), violation_ns=viol)

    def state(self, key) -> GpuState:  # type: ignore[no-untyped-def]
        nv, h = self.nv, self._h(key)
        st = self.quick_state(key)
        power = self._try(nv.nvmlDeviceGetPowerUsage, h)
        dec = (lambda v: v.decode() if isinstance(v, bytes) else v)  # noqa: E731 - old bindings return bytes
        pci = self._try(nv.nvmlDeviceGetPciInfo, h)
        st.name, st.uuid = dec(self._try(nv.nvmlDeviceGetName, h)), dec(self._try(nv.nvmlDeviceGetUUID, h))
        st.driver = dec(self._try(nv.nvmlSystemGetDriverVersion))
        st.temperature_c = self._try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
        st.power_w = power / 1000.0 if power is not None else None
        st.pci_bus_id = dec(getattr(pci, "busId", None)) if pci is not None else None
        return st

    def default_targets(self, key) -> tuple:  # type: ignore[no-untyped-def]
        """A graphics clock the GPU sustains under tensor-core load, and the top memory clock.

        The default applications clock is the base clock on some boards but max boost on others
        (H100 SXM: both 1980 MHz), where a lock would run into the power cap under load; then the
        lock asks NVML for the TDP clock (``NVML_CLOCK_LIMIT_ID_TDP``) instead."""
        nv, h = self.nv, self._h(key)
        g = self._try(nv.nvmlDeviceGetDefaultApplicationsClock, h, nv.NVML_CLOCK_GRAPHICS)
        top = self._try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_GRAPHICS)
        m = self._try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM)
        if g is not None and top is not None and g < top:
            return g, m, f"default applications clock ({g} MHz, below max boost {top} MHz)"
        return TDP, m, "TDP clock (NVML_CLOCK_LIMIT_ID_TDP): the default applications clock is max boost"

    def save(self, key) -> dict:  # type: ignore[no-untyped-def]
        """What an admin may have set, so restore puts it back instead of resetting to defaults."""
        nv, h = self.nv, self._h(key)
        get = getattr(nv, "nvmlDeviceGetApplicationsClock", None)
        dflt = getattr(nv, "nvmlDeviceGetDefaultApplicationsClock", None)
        return {"app_graphics_mhz": self._try(get, h, nv.NVML_CLOCK_GRAPHICS),
                "app_memory_mhz": self._try(get, h, nv.NVML_CLOCK_MEM),
                "default_app_graphics_mhz": self._try(dflt, h, nv.NVML_CLOCK_GRAPHICS),
                "default_app_memory_mhz": self._try(dflt, h, nv.NVML_CLOCK_MEM), "app_clocks_set": False}

    def lock(self, key, graphics_mhz, memory_mhz, saved: dict | None = None) -> None:  # type: ignore[no-untyped-def]
        nv, h = self.nv, self._h(key)
        try:
            if graphics_mhz == TDP:
                tdp = getattr(nv, "NVML_CLOCK_LIMIT_ID_TDP", _TDP_ID)
                nv.nvmlDeviceSetGpuLockedClocks(h, tdp, tdp)
            elif graphics_mhz is not None:
                nv.nvmlDeviceSetGpuLockedClocks(h, graphics_mhz, graphics_mhz)
            if memory_mhz is not None:
                try:
                    nv.nvmlDeviceSetMemoryLockedClocks(h, memory_mhz, memory_mhz)
                except (nv.NVMLError_NotSupported, AttributeError):
                    g = graphics_mhz if isinstance(graphics_mhz, int) else self.state(key).graphics_mhz
                    nv.nvmlDeviceSetApplicationsClocks(h, memory_mhz, g)
                    if saved is not None:
                        saved["app_clocks_set"] = True
        except nv.NVMLError_NoPermission:
            raise ClockError(permission_fix(f"NVML: GPU {key} lock")) from None
        except nv.NVMLError as exc:
            raise ClockError(f"NVML: GPU {key}: cannot lock clocks at {graphics_mhz}/{memory_mhz} MHz: "
                             f"{self._why(exc)} — pick supported values (nvidia-smi -q -d SUPPORTED_CLOCKS)") from None

    def _call(self, fn: str, key, *args) -> None:  # type: ignore[no-untyped-def]
        nv, h = self.nv, self._h(key)
        try:
            getattr(nv, fn)(h, *args)
        except nv.NVMLError_NoPermission:
            raise ClockError(permission_fix(f"NVML: GPU {key} restore")) from None
        except (nv.NVMLError, AttributeError):
            pass  # not supported here: nothing of that kind was set

    def restore(self, key, saved: dict | None) -> None:  # type: ignore[no-untyped-def]
        """Undo exactly what ``lock`` did: the locked clocks, and application clocks only if the
        memory fallback changed them (back to what they were, not to the defaults)."""
        self._call("nvmlDeviceResetGpuLockedClocks", key)
        self._call("nvmlDeviceResetMemoryLockedClocks", key)
        if saved and saved.get("app_clocks_set"):
            g, m = saved.get("app_graphics_mhz"), saved.get("app_memory_mhz")
            if g and m:
                self._call("nvmlDeviceSetApplicationsClocks", key, m, g)
            else:
                self._call("nvmlDeviceResetApplicationsClocks", key)

    def reset(self, key) -> None:  # type: ignore[no-untyped-def]
        """Locked clocks back to the driver's default (used for a dead run's lock, whose saved
        application clocks are in its record and go through ``restore``)."""
        self.restore(key, None)

    def processes(self, key) -> list[int]:  # type: ignore[no-untyped-def]
        nv, h = self.nv, self._h(key)
        procs = self._try(nv.nvmlDeviceGetComputeRunningProcesses, h) or []
        return sorted(int(p.pid) for p in procs)

    def xid_errors(self, key) -> list[int]:  # type: ignore[no-untyped-def]
        """Critical Xid events on this GPU since the previous call (the first call subscribes)."""
        nv, h = self.nv, self._h(key)
        ev = self._events.get(key)
        if ev is None:
            try:
                ev = nv.nvmlEventSetCreate()
                nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, ev)
            except (nv.NVMLError, AttributeError):
                return []
            self._events[key] = ev
            return []
        found = []
        while True:
            try:
                data = nv.nvmlEventSetWait_v2(ev, 0)
            except (nv.NVMLError, AttributeError):
                return found
            found.append(int(data.eventData))


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

"""An NVML shim with the ``nvidia-ml-py`` (``pynvml``) API over a ``FakeMachine``.

As NVML does: indices are PCI order and ignore ``CUDA_VISIBLE_DEVICES``; handles come from an
index, a UUID (GPU or MIG) or a PCI bus id; setters need root (NVMLError_NoPermission); a MIG
handle resolves to its parent with nvmlDeviceGetDeviceHandleFromMigDeviceHandle.
"""

from __future__ import annotations

import types
from dataclasses import dataclass

from .machine import FakeMachine


@dataclass(frozen=True)
class Handle:
    uuid: str
    mig: str | None = None


def fake_pynvml(m: FakeMachine) -> types.ModuleType:
    nv = types.ModuleType("pynvml")
    calls: list = []
    nv.calls = calls

    class NVMLError(Exception):
        pass

    for name in ("NotSupported", "NoPermission", "NotFound", "InvalidArgument", "Timeout",
                 "LibraryNotFound", "DriverNotLoaded"):
        setattr(nv, f"NVMLError_{name}", type(f"NVMLError_{name}", (NVMLError,), {}))
    nv.NVMLError = NVMLError
    nv.NVML_CLOCK_GRAPHICS, nv.NVML_CLOCK_SM, nv.NVML_CLOCK_MEM = 0, 1, 2
    nv.NVML_TEMPERATURE_GPU, nv.NVML_PERF_POLICY_POWER, nv.NVML_PERF_POLICY_THERMAL = 0, 0, 1
    nv.NVML_CLOCK_LIMIT_ID_TDP = 0xFFFFFF01
    nv.nvmlEventTypeXidCriticalError = 8

    def gpu(h: Handle):  # type: ignore[no-untyped-def]
        m.refresh()
        g = m.find(h.uuid)
        if g is None:
            raise nv.NVMLError_NotFound()
        return g

    def need_root(name: str, fn):  # type: ignore[no-untyped-def]
        def wrapped(h, *a):  # type: ignore[no-untyped-def]
            calls.append((name, h.uuid, *a))
            if not m.root:
                raise nv.NVMLError_NoPermission()
            g = gpu(h)
            if not m.ignore_lock or not name.startswith("set_locked"):
                fn(g, *a)
            m.save()
        return wrapped

    nv.nvmlInit = lambda: None
    nv.nvmlShutdown = lambda: None
    nv.nvmlSystemGetDriverVersion = lambda: "550.54.15"
    nv.nvmlDeviceGetCount = lambda: len(m.refresh().gpus)

    def by_index(i):  # type: ignore[no-untyped-def]
        m.refresh()
        if not 0 <= int(i) < len(m.gpus):
            raise nv.NVMLError_InvalidArgument()
        return Handle(m.gpus[int(i)].uuid)

    def by_uuid(u):  # type: ignore[no-untyped-def]
        u = u.decode() if isinstance(u, bytes) else u
        g = m.refresh().find(u)
        if g is None:
            raise nv.NVMLError_NotFound()
        return Handle(g.uuid, u if u.startswith("MIG-") else None)

    def by_pci(bus):  # type: ignore[no-untyped-def]
        g = m.refresh().find(bus.decode() if isinstance(bus, bytes) else bus)
        if g is None:
            raise nv.NVMLError_NotFound()
        return Handle(g.uuid)

    nv.nvmlDeviceGetHandleByIndex, nv.nvmlDeviceGetHandleByUUID = by_index, by_uuid
    nv.nvmlDeviceGetHandleByPciBusId_v2 = nv.nvmlDeviceGetHandleByPciBusId = by_pci
    nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle = lambda h: Handle(h.uuid)
    nv.nvmlDeviceGetName = lambda h: gpu(h).name
    nv.nvmlDeviceGetUUID = lambda h: h.mig or gpu(h).uuid
    nv.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=gpu(h).pci)

    def clock(h, kind):  # type: ignore[no-untyped-def]
        g = gpu(h)
        gr, mem, _ = m.clocks(g)
        return mem if kind == nv.NVML_CLOCK_MEM else gr

    nv.nvmlDeviceGetClockInfo = clock
    nv.nvmlDeviceGetMaxClockInfo = lambda h, k: gpu(h).mem_mhz if k == nv.NVML_CLOCK_MEM else gpu(h).max_mhz
    nv.nvmlDeviceGetDefaultApplicationsClock = \
        lambda h, k: gpu(h).mem_mhz if k == nv.NVML_CLOCK_MEM else gpu(h).default_app_mhz
    nv.nvmlDeviceGetApplicationsClock = \
        lambda h, k: (gpu(h).app_mem_mhz or gpu(h).mem_mhz) if k == nv.NVML_CLOCK_MEM else (gpu(h).app_mhz or gpu(h).default_app_mhz)
    nv.nvmlDeviceGetCurrentClocksEventReasons = lambda h: m.clocks(gpu(h))[2]
    nv.nvmlDeviceGetTemperature = lambda h, s: 45
    nv.nvmlDeviceGetPowerUsage = lambda h: 650_000 if gpu(h).busy else 70_000
    nv.nvmlDeviceGetViolationStatus = \
        lambda h, p: types.SimpleNamespace(referenceTime=0, violationTime=m.violation(gpu(h)) if p == 0 else 0)
    nv.nvmlDeviceGetComputeRunningProcesses = lambda h: [types.SimpleNamespace(pid=p) for p in gpu(h).procs]

    def set_locked(g, lo, hi):  # type: ignore[no-untyped-def]
        g.locked = "tdp" if lo == nv.NVML_CLOCK_LIMIT_ID_TDP else lo

    def set_mem(g, lo, hi):  # type: ignore[no-untyped-def]
        if not m.mem_lock_supported:
            raise nv.NVMLError_NotSupported()
        g.mem_locked = lo

    def set_app(g, mem, gr):  # type: ignore[no-untyped-def]
        g.app_mem_mhz, g.app_mhz = mem, gr

    def reset_app(g):  # type: ignore[no-untyped-def]
        g.app_mem_mhz = g.app_mhz = None

    nv.nvmlDeviceSetGpuLockedClocks = need_root("set_locked_gpu", set_locked)
    nv.nvmlDeviceSetMemoryLockedClocks = need_root("set_locked_mem", set_mem)
    nv.nvmlDeviceSetApplicationsClocks = need_root("set_app", set_app)
    nv.nvmlDeviceResetGpuLockedClocks = need_root("reset_locked_gpu", lambda g: setattr(g, "locked", None))
    nv.nvmlDeviceResetMemoryLockedClocks = need_root("reset_locked_mem", lambda g: setattr(g, "mem_locked", None))
    nv.nvmlDeviceResetApplicationsClocks = need_root("reset_app", reset_app)

    sets: dict = {}

    def ev_create():  # type: ignore[no-untyped-def]
        s = types.SimpleNamespace(uuids=[])
        sets[id(s)] = s
        return s

    def ev_register(h, kind, s):  # type: ignore[no-untyped-def]
        s.uuids.append(h.uuid)

    def ev_wait(s, timeout_ms):  # type: ignore[no-untyped-def]
        m.refresh()
        for u in s.uuids:
            g = m.find(u)
            if g is not None and g.xids:
                x = g.xids.pop(0)
                m.save()
                return types.SimpleNamespace(eventData=x)
        raise nv.NVMLError_Timeout()

    nv.nvmlEventSetCreate, nv.nvmlDeviceRegisterEvents, nv.nvmlEventSetWait_v2 = ev_create, ev_register, ev_wait
    return nv

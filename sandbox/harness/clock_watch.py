"""What the GPU's clocks did around each timed sample, per side of the paired measurement.

Standalone (stdlib only: ctypes into ``libnvidia-ml.so.1``, the library every NVIDIA driver
installs, so nothing need be installed in the job): shipped beside the harness and loaded by path.

Why per sample: a power cap that every sustained GEMM hits is the normal state of a card with
unlocked clocks, and it hits the reference and the candidate alike when they are timed
interleaved (ABBA). Job-level readings (the runner's sampler, the harness's readings before and
after timing) cannot tell whose samples it slowed, so they refuse both. Read around every sample
— outside its CUDA events — the clock-event reasons, the SM and memory clocks and the driver's
power/thermal violation counters say which side saw what, and the Critic's env gate refuses only
when the sides differ (or a locked clock moved off its lock).

Each sample gets a reading before and after it: the reasons are OR-ed over the two, the
violation counters' difference is the time a power or thermal limit held the clocks down during
the sample, and the clocks are the after-reading's (the device has just finished that side's
work). Readings whose clock-event reasons say the GPU is idle (clocks dropping) are kept out of
the clock statistics. A reading is four NVML queries; its cost is measured and reported.
"""

from __future__ import annotations

import ctypes
import time

BAD_THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80  # SwPowerCap, HwSlowdown, Sw/HwThermal, HwPowerBrake
IDLE_BIT = 0x1  # nvmlClocksEventReasonGpuIdle: nothing runs, clocks are dropping
_CLOCK_SM, _CLOCK_MEM = 1, 2  # nvmlClockType_t
_POLICY_POWER, _POLICY_THERMAL = 0, 1  # nvmlPerfPolicyType_t


class NvmlUnavailable(Exception):
    """No per-sample readings: the message says why (no driver library, the GPU not found, ...)."""


class _ViolationTime(ctypes.Structure):
    _fields_ = [("referenceTime", ctypes.c_ulonglong), ("violationTime", ctypes.c_ulonglong)]


class NvmlReader:
    """The four NVML queries a reading needs, through ctypes. The GPU is found by the UUID torch
    reports (NVML ignores ``CUDA_VISIBLE_DEVICES``, so an index would name another GPU), else by
    its PCI bus id; a MIG instance reads its parent GPU, whose clocks it shares."""

    def __init__(self, uuid: str | None, pci_bus_id: str | None, library: str = "libnvidia-ml.so.1") -> None:
        try:
            lib = ctypes.CDLL(library)
        except OSError as exc:
            raise NvmlUnavailable(f"{library} cannot be loaded ({exc})") from None
        self.lib = lib
        init = getattr(lib, "nvmlInit_v2", None) or getattr(lib, "nvmlInit", None)
        if init is None or init() != 0:
            raise NvmlUnavailable("nvmlInit failed (no permission on the device nodes, or no driver)")
        handle = ctypes.c_void_p()
        found = False
        if uuid:
            found = lib.nvmlDeviceGetHandleByUUID(ctypes.c_char_p(uuid.encode()), ctypes.byref(handle)) == 0
        if not found and pci_bus_id:
            by_pci = getattr(lib, "nvmlDeviceGetHandleByPciBusId_v2", None) or lib.nvmlDeviceGetHandleByPciBusId
            found = by_pci(ctypes.c_char_p(pci_bus_id.encode()), ctypes.byref(handle)) == 0
        if not found:
            raise NvmlUnavailable(f"NVML knows no GPU with UUID {uuid} or PCI bus id {pci_bus_id}")
        parent = ctypes.c_void_p()
        mig = getattr(lib, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", None)
        if uuid and uuid.startswith("MIG-") and mig is not None and mig(handle, ctypes.byref(parent)) == 0:
            handle = parent
        self.handle = handle
        # renamed in R535 (clocks "event" reasons); older drivers export only the throttle name
        self._reasons = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            lib.nvmlDeviceGetCurrentClocksThrottleReasons
        self._clock, self._viol = lib.nvmlDeviceGetClockInfo, getattr(lib, "nvmlDeviceGetViolationStatus", None)
        self._mhz, self._mask, self._time = ctypes.c_uint(), ctypes.c_ulonglong(), _ViolationTime()
        if self.read() is None:
            raise NvmlUnavailable("NVML answered no clock or clock-event reason for this GPU")

    def read(self) -> tuple[int, int, int, int] | None:
        """(SM MHz, memory MHz, clock-event reasons, power + thermal violation ns), or None."""
        h, ref = self.handle, ctypes.byref
        if self._clock(h, _CLOCK_SM, ref(self._mhz)) != 0:
            return None
        sm = self._mhz.value
        if self._clock(h, _CLOCK_MEM, ref(self._mhz)) != 0 or self._reasons(h, ref(self._mask)) != 0:
            return None
        viol = 0
        for policy in (_POLICY_POWER, _POLICY_THERMAL):
            if self._viol is not None and self._viol(h, policy, ref(self._time)) == 0:
                viol += int(self._time.violationTime)
        return sm, self._mhz.value, int(self._mask.value), viol


class _Side:
    def __init__(self) -> None:
        self.n = self.throttled = self.reasons = self.idle = 0
        self.violation_ns = 0
        self.sm: dict[int, int] = {}
        self.mem: dict[int, int] = {}

    def add(self, pre: tuple, post: tuple) -> None:
        reasons = pre[2] | post[2]
        viol = max(0, post[3] - pre[3])
        self.n += 1
        self.reasons |= reasons & BAD_THROTTLE_MASK
        self.violation_ns += viol
        if reasons & BAD_THROTTLE_MASK or viol > 0:
            self.throttled += 1
        if post[2] & IDLE_BIT:
            self.idle += 1
            return
        self.sm[post[0]] = self.sm.get(post[0], 0) + 1
        self.mem[post[1]] = self.mem.get(post[1], 0) + 1

    def facts(self) -> dict:
        return {"n": self.n, "throttled": self.throttled, "reasons": self.reasons, "idle": self.idle,
                "violation_ms": round(self.violation_ns / 1e6, 3),
                "sm_mhz": {str(k): v for k, v in sorted(self.sm.items())},
                "mem_mhz": {str(k): v for k, v in sorted(self.mem.items())}}


class ClockWatch:
    """Brackets samples: ``before()``, the sample, ``after(side)``. ``read`` returns a reading tuple
    (see ``NvmlReader.read``) or None; a test hands in its own."""

    def __init__(self, read, source: str = "nvml", clock=time.perf_counter_ns) -> None:  # type: ignore[no-untyped-def]
        self.read, self.source, self.clock = read, source, clock
        self.sides = (_Side(), _Side())
        self.read_ns: list[int] = []
        self.failed = 0
        self._pre: tuple | None = None

    def _reading(self) -> tuple | None:
        t0 = self.clock()
        try:
            r = self.read()
        except Exception:  # noqa: BLE001  a driver hiccup costs this sample its evidence, nothing else
            r = None
        self.read_ns.append(self.clock() - t0)
        if r is None:
            self.failed += 1
        return r

    def before(self) -> None:
        self._pre = self._reading()

    def after(self, side: int) -> None:
        post, pre, self._pre = self._reading(), self._pre, None
        if pre is not None and post is not None:
            self.sides[side].add(pre, post)

    def facts(self) -> dict:
        ns = sorted(self.read_ns)
        return {"source": self.source, "read_us": round(ns[len(ns) // 2] / 1e3, 2) if ns else None,
                "reads": len(ns), "failed_reads": self.failed, "read_s": round(sum(ns) / 1e9, 4),
                "sides": [s.facts() for s in self.sides]}


def open_watch(fingerprint: dict, library: str = "libnvidia-ml.so.1") -> tuple[ClockWatch | None, dict]:
    """A watch on the GPU the harness runs on, or None and the facts that say why there is none."""
    if fingerprint.get("device_uuid") is None and fingerprint.get("device_pci_bus_id") is None:
        return None, {"source": None, "why": "torch reported neither a UUID nor a PCI bus id for the device"}
    try:
        reader = NvmlReader(fingerprint.get("device_uuid"), fingerprint.get("device_pci_bus_id"), library)
    except NvmlUnavailable as exc:
        return None, {"source": None, "why": str(exc)}
    except (AttributeError, OSError) as exc:  # a library without the symbols NVML documents
        return None, {"source": None, "why": f"{library}: {exc}"}
    return ClockWatch(reader.read), {"source": "nvml"}

"""The vocabulary every GPU backend shares: the state it reads, the error it raises, the
clocks-event (throttle) bits NVML documents, and the permission text for a refused lock.

Devices are named by a *key*: an ``int`` NVML/amd-smi index, or a string — a UUID (``GPU-…``,
``MIG-…``) or a PCI bus id (``0000:3b:00.0``). Indices are only a starting point: they change
with ``CUDA_VISIBLE_DEVICES`` and driver enumeration, so the clock guard resolves a key to the
device's UUID (AMD: PCI address) once and uses that from then on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..runner import SandboxError

__all__ = ["ClockError", "GpuState", "THROTTLE_BITS", "BAD_THROTTLE_MASK", "IDLE_BIT", "POWER_CAP_BIT",
           "decode_throttle", "permission_fix", "is_pci_bus_id"]

# NVML clocks-event reasons (nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*).
THROTTLE_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
                 0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal", 0x40: "hw_thermal",
                 0x80: "hw_power_brake", 0x100: "display_clock_setting"}
# Reasons that mean "slower than the clocks we asked for" (locked clocks still throttle at the
# power limit); idle, application-clock and sync-boost settings do not.
BAD_THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
IDLE_BIT = 0x1
POWER_CAP_BIT = 0x4  # SwPowerCap: "clocks optimized not to exceed the power limit" — every sustained GEMM

_PCI = re.compile(r"^([0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


def is_pci_bus_id(key: object) -> bool:
    return isinstance(key, str) and bool(_PCI.match(key))


class ClockError(SandboxError):
    """Clock control or GPU state is unavailable or refused; one line with the fix."""


def decode_throttle(mask: int | None) -> list[str]:
    if not mask:
        return []
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit]


def permission_fix(what: str) -> str:
    """Locked clocks (nvmlDeviceSetGpuLockedClocks, ``nvidia-smi -lgc``) need root on the host; the
    ``-acp UNRESTRICTED`` switch relaxes only *application* clocks, so it is not suggested here."""
    return (f"{what}: permission denied — locking clocks needs root with CAP_SYS_ADMIN on the host "
            "(inside a container: lock on the host before starting it); otherwise use sandbox.clocks: verify")


@dataclass
class GpuState:
    index: object  # the key the state was read with
    name: str | None = None
    uuid: str | None = None
    driver: str | None = None
    graphics_mhz: int | None = None
    memory_mhz: int | None = None
    sm_mhz: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    throttle_reasons: int | None = None
    pci_bus_id: str | None = None
    busy: bool | None = None  # activity seen by the driver (AMD: gfx_activity > 0); None: unknown
    violation_ns: dict = field(default_factory=dict)  # cumulative power/thermal violation time

    @property
    def idle(self) -> bool:
        """The driver says nothing runs (NVML's GpuIdle bit, or AMD's zero activity)."""
        if self.throttle_reasons is not None and self.throttle_reasons & IDLE_BIT:
            return True
        return self.busy is False

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["throttle"] = decode_throttle(self.throttle_reasons)
        return d

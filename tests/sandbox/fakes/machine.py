"""The simulated GPUs and the documented behaviour the fakes share.

Modelled: idle clocks drop with the GpuIdle reason set; under load a locked GPU runs at its lock,
an unlocked one at max boost, a TDP lock at the TDP clock; with ``power_cap_mhz`` set, work above
that clock is capped there with SwPowerCap set and the power-violation counter advancing;
``ignore_lock`` accepts the call and changes nothing; non-root callers get NO_PERMISSION;
``mem_lock_supported=False`` refuses memory locks (pre-Ampere) but takes application clocks;
with ``idle_mem_mhz`` set (GDDR boards: L4, A10, T4) an idle GPU parks its memory clock there too
(performance state P8), lock or no lock, as it parks the graphics clock.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class FakeGpu:
    uuid: str
    pci: str
    name: str = "NVIDIA H100 80GB HBM3"
    max_mhz: int = 1980
    default_app_mhz: int = 1980
    tdp_mhz: int = 1590
    mem_mhz: int = 2619
    idle_mhz: int = 345
    idle_mem_mhz: int | None = None  # GDDR boards drop the memory clock at idle (HBM keeps it)
    power_cap_mhz: int | None = None  # under load, clocks above this hit the power cap
    locked: object = None  # None | int | "tdp"
    mem_locked: int | None = None
    app_mhz: int | None = None  # application clocks an admin set (None: default)
    app_mem_mhz: int | None = None
    perf_level: str = "AUTO"  # AMD
    soft_max_mhz: int | None = None  # AMD --perf-determinism
    stable_mhz: int = 1300  # AMD STABLE_STD profiling clock
    mig: list = field(default_factory=list)  # MIG instance UUIDs
    procs: list = field(default_factory=list)
    xids: list = field(default_factory=list)
    violation_ns: int = 0  # power-violation time accumulated over finished busy periods
    busy: bool = False
    busy_since: float = 0.0
    vendor: str = "nvidia"


def h100_sxm(i: int, **kw) -> FakeGpu:
    return FakeGpu(uuid=f"GPU-{i:08d}-aaaa-bbbb-cccc-000000000000", pci=f"00000000:{0x18 + i * 0x20:02X}:00.0", **kw)


def mi300x(i: int, **kw) -> FakeGpu:
    return FakeGpu(uuid=f"{i:02x}ff74a1-0000-1000-80ff-c5e0d6cd1a2b", pci=f"0000:{0x0c + i * 0x20:02x}:00.0",
                   name="AMD Instinct MI300X", max_mhz=2100, default_app_mhz=2100, tdp_mhz=2100,
                   mem_mhz=1300, idle_mhz=132, vendor="amd", **kw)


@dataclass
class FakeMachine:
    path: Path
    gpus: list = field(default_factory=list)
    root: bool = True
    ignore_lock: bool = False
    mem_lock_supported: bool = True
    old_field_names: bool = False  # a driver from before clocks_event_reasons existed
    sanity_ok: bool = True

    # ---- persistence: the CLI fakes run in other processes
    def save(self) -> "FakeMachine":
        d = asdict(self)
        d["path"] = str(self.path)
        tmp = self.path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(d))
        os.replace(tmp, self.path)  # atomic: a sampler thread or a CLI may read at any moment
        return self

    @classmethod
    def load(cls, path) -> "FakeMachine":  # type: ignore[no-untyped-def]
        d = json.loads(Path(path).read_text())
        d["path"] = Path(d["path"])
        d["gpus"] = [FakeGpu(**g) for g in d["gpus"]]
        return cls(**d)

    def refresh(self) -> "FakeMachine":
        fresh = FakeMachine.load(self.path)
        self.__dict__.update(fresh.__dict__)
        return self

    @contextlib.contextmanager
    def busy(self, key=None):  # type: ignore[no-untyped-def]
        """Work on the GPU(s) while the body runs (the guard's load burst, or a job)."""
        self.refresh()
        for g in self.gpus:
            if key is None or key in (g.uuid, g.pci.lower(), g.pci) or str(key) == str(self.gpus.index(g)):
                g.busy, g.busy_since = True, time.time()
        self.save()
        try:
            yield
        finally:
            self.refresh()
            for g in self.gpus:
                g.violation_ns = self.violation(g)
                g.busy = False
            self.save()

    def violation(self, g: FakeGpu) -> int:
        """Cumulative time at the power limit: it advances while capped work runs."""
        capped = g.busy and g.vendor == "nvidia" and g.power_cap_mhz and self._want(g) > g.power_cap_mhz
        return g.violation_ns + (int((time.time() - g.busy_since) * 1e9) if capped else 0)

    # ---- lookups and documented behaviour
    def find(self, key) -> FakeGpu | None:  # type: ignore[no-untyped-def]
        k = str(key)
        for i, g in enumerate(self.gpus):
            if k in (str(i), g.uuid, g.pci, g.pci.lower()) or k in g.mig or \
                    k.lower().split(":", 1)[-1] == g.pci.lower().split(":", 1)[-1]:
                return g
        return None

    def clocks(self, g: FakeGpu) -> tuple[int, int, int]:
        """(graphics MHz, memory MHz, clocks-event reasons) right now."""
        if not g.busy:
            return g.idle_mhz, g.idle_mem_mhz or g.mem_locked or g.mem_mhz, 0x1
        want, reasons = self._want(g), 0
        if g.power_cap_mhz and want > g.power_cap_mhz:
            want, reasons = g.power_cap_mhz, 0x4
        return want, g.mem_locked or g.mem_mhz, reasons

    def _want(self, g: FakeGpu) -> int:
        """The clock the GPU would run work at, before any power cap."""
        if g.vendor == "amd":
            want = g.stable_mhz if g.perf_level == "STABLE_STD" else g.max_mhz
            if g.soft_max_mhz:
                want = min(want, g.soft_max_mhz)
        elif g.locked == "tdp":
            want = g.tdp_mhz
        elif isinstance(g.locked, int):
            want = g.locked
        else:
            want = g.app_mhz or g.max_mhz
        return want

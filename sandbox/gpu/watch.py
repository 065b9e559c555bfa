"""Watching the GPU while work runs: a load burst to verify a lock, a sampler during every job,
and the health check after a job had to be killed.

An idle GPU parks its clocks low and reports nothing useful about a lock (a driver that ignored
the lock looks the same as one that honours it until work arrives), and throttling happens under
load — so both are checked under load: a short matmul burst in a child process for the lock, a
sampler thread for the duration of each job (clock-event reasons OR-ed over the busy samples,
the driver's power/thermal violation counters before and after).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from .state import BAD_THROTTLE_MASK, POWER_CAP_BIT, ClockError, GpuState

__all__ = ["load_burst", "sanity_kernel", "ThrottleSampler", "recover_after_kill"]

_BURST = """
import sys, time, torch
dev = torch.device("cuda", 0)
a = torch.randn(4096, 4096, device=dev, dtype=torch.float16)
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    (a @ a).sum().item()
"""

_SANITY = """
import torch
a = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
ok = bool(((a * 2).sum() == float((1 << 20) * ((1 << 20) - 1))).item())
torch.cuda.synchronize()
print("ok" if ok else "wrong", flush=True)
"""


def _visible_env(key, amd: bool) -> dict:  # type: ignore[no-untyped-def]
    """The child sees only ``key`` (a UUID or a PCI-order index) as its device 0."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.endswith("VISIBLE_DEVICES")}
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    env["HIP_VISIBLE_DEVICES" if amd else "CUDA_VISIBLE_DEVICES"] = str(key)
    return env


@contextlib.contextmanager
def load_burst(key, seconds: float = 4.0, amd: bool = False) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Keep GPU ``key`` busy (fp16 matmuls) while the body runs; the child is always reaped."""
    p = subprocess.Popen([sys.executable, "-c", _BURST, str(seconds)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=_visible_env(key, amd), start_new_session=True)
    try:
        line = p.stdout.readline().strip() if p.stdout else ""
        if line != "ready":
            err = (p.stderr.read() if p.stderr else "").strip().splitlines()
            raise ClockError(f"GPU {key}: cannot load the GPU to verify the lock ({err[-1] if err else 'no output'}) "
                             "— Arbor's Python needs a CUDA/ROCm torch to lock clocks")
        yield
    finally:
        p.kill()
        p.wait()


def sanity_kernel(key, timeout_s: float = 60.0, amd: bool = False) -> str | None:  # type: ignore[no-untyped-def]
    """None when a tiny kernel runs and computes the right answer on ``key``, else why not."""
    try:
        r = subprocess.run([sys.executable, "-c", _SANITY], capture_output=True, text=True,
                           timeout=timeout_s, env=_visible_env(key, amd), check=False)
    except subprocess.TimeoutExpired:
        return f"a sanity kernel did not finish in {timeout_s:g} s"
    if r.stdout.strip() != "ok":
        err = (r.stderr or r.stdout).strip().splitlines()
        return f"a sanity kernel failed ({err[-1] if err else 'no output'})"
    return None


@dataclass
class ThrottleSampler:
    """Samples ``read()`` every ``interval_s`` on a daemon thread between ``start`` and ``stop``.

    ``start(first)`` takes the reading the caller already made (the guard's per-job check, the
    same moment) instead of reading again; ``stop(final)`` reads the end state with ``final``
    (default ``read``) and keeps it in ``last``, so the guard's fingerprint reuses it."""

    read: Callable[[], GpuState]
    interval_s: float = 0.1
    samples: list[GpuState] = field(default_factory=list)
    first: GpuState | None = None
    last: GpuState | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self, first: GpuState | None = None) -> None:
        self.first = first if first is not None else self._read(self.read)
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="arbor-gpu-sampler", daemon=True)
        self._thread.start()

    @staticmethod
    def _read(read: Callable[[], GpuState]) -> GpuState | None:
        try:
            return read()
        except ClockError:
            return None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            st = self._read(self.read)
            if st is not None:
                self.samples.append(st)

    def stop(self, final: Callable[[], GpuState] | None = None) -> dict:
        """What was seen: busy samples, reasons OR-ed over them, clock range, violation deltas;
        ``steady_graphics_mhz`` is the median graphics clock of the busy samples no power or
        thermal limit held down (what a lock must match), ``memory_*`` the memory clock range."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.last = self._read(final or self.read)
        busy = [s for s in self.samples if not s.idle]
        reasons = 0
        for s in busy:
            reasons |= int(s.throttle_reasons or 0)
        clocks = [s.graphics_mhz for s in busy if s.graphics_mhz is not None]
        steady = sorted(s.graphics_mhz for s in busy if s.graphics_mhz is not None
                        and not int(s.throttle_reasons or 0) & BAD_THROTTLE_MASK)
        mem = [s.memory_mhz for s in busy if s.memory_mhz is not None]
        viol = {}
        if self.first is not None and self.last is not None:
            for k, v in self.last.violation_ns.items():
                if k in self.first.violation_ns:
                    viol[k] = round((v - self.first.violation_ns[k]) / 1e6, 3)
        return {"samples": len(self.samples), "busy_samples": len(busy), "throttle_reasons": reasons,
                "throttled": bool(reasons & BAD_THROTTLE_MASK) or any(ms > 0 for ms in viol.values()),
                "power_capped": bool(reasons & POWER_CAP_BIT) or viol.get("power", 0) > 0,
                "graphics_min_mhz": min(clocks) if clocks else None,
                "graphics_max_mhz": max(clocks) if clocks else None,
                "steady_graphics_mhz": steady[len(steady) // 2] if steady else None,
                "memory_min_mhz": min(mem) if mem else None, "memory_max_mhz": max(mem) if mem else None,
                "violation_ms": viol}


def recover_after_kill(backend, key, before_pids: set[int], sanity: Callable, *,  # type: ignore[no-untyped-def]
                       wait_s: float = 10.0, sleep: Callable[[float], None] = time.sleep) -> str | None:
    """After a job was killed: None when the GPU is usable again, else why not (the stop reason).

    Checks, in order: the killed job's GPU processes are gone (the driver frees its context only
    when they are), no critical Xid was logged, and a sanity kernel runs correctly."""
    procs = getattr(backend, "processes", None)
    if procs is not None:
        left: list[int] = []
        for attempt in range(max(1, int(wait_s / 0.5)) + 1):  # the driver frees a context late
            try:
                left = sorted(set(procs(key)) - before_pids)
            except ClockError:
                left = []
            if not left or attempt == int(wait_s / 0.5):
                break
            sleep(0.5)
        if left:
            return f"GPU {key}: process(es) {left} of the killed job still hold the GPU after {wait_s:g} s"
    xids = getattr(backend, "xid_errors", None)
    if xids is not None:
        from .control import CRITICAL_XIDS

        bad = [x for x in xids(key) if x in CRITICAL_XIDS]
        if bad:
            return f"GPU {key}: critical Xid error(s) {bad} after the killed job"
    why = sanity(key)
    return f"GPU {key}: {why} after the killed job" if why else None

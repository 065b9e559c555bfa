"""Clock control for a campaign: ``lock`` | ``verify`` | ``ignore``, as a runner hook.

Boost clocks alone move kernel timings by 10-30% (SOL-ExecBench), so a campaign that compares
candidates measured minutes apart must know the GPU ran at the same speed for both:

* ``lock``   — pin graphics and memory clocks (NVML, nvidia-smi, amd-smi), wait for them to settle,
  **read them back and refuse to measure** when they did not take; re-check before every job
  (re-locking once if something reset them); restore the previous state on close, Ctrl-C,
  ``atexit`` and SIGTERM. A crash leaves a ``clocks_locked`` record in the store that the next
  start finds and undoes (``arbor/campaign/sandbox_setup.py`` keeps that record).
* ``verify`` — change nothing; check that clocks are where ``clock_targets`` say (if given) and
  record them in every fingerprint, so the Critic's env gate sees drift and throttling.
* ``ignore`` — record what can be read, check nothing.

``after`` adds the GPU state (name, UUID, driver, clocks, temperature, power, throttle reasons)
and the host facts to every job's fingerprint; on a machine without a GPU the NVML path fails
with a one-line reason, stored in the fingerprint as ``gpu_error``.
"""

from __future__ import annotations

import atexit
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from .fingerprint import host_fingerprint
from .gpu_control import BAD_THROTTLE_MASK, ClockError, GpuBackend, GpuState, open_backend
from .runner import Job, JobResult

__all__ = ["ClockGuard", "ClockTargets", "ClockError", "MODES"]

MODES = ("lock", "verify", "ignore")
_IDLE = 0x1


@dataclass
class ClockTargets:
    graphics_mhz: int | None = None
    memory_mhz: int | None = None
    tolerance_mhz: int = 50
    settle_s: float = 3.0


@dataclass
class ClockGuard:
    """A ``JobHook`` that holds a device at known clocks and fingerprints every job."""

    mode: str
    device: str = "cpu"  # "cpu", "cuda", "cuda:N"
    targets: ClockTargets = field(default_factory=ClockTargets)
    backend_factory: Callable[[], GpuBackend] = open_backend
    on_lock: Callable[[dict], None] | None = None  # the store's "clocks_locked" record, written
    on_restore: Callable[[dict], None] | None = None  # before locking; "clocks_restored" after
    sleep: Callable[[float], None] = time.sleep
    backend: GpuBackend | None = None
    locked: dict | None = None  # what start() locked (the store's "clocks_locked" payload)
    gpu_error: str | None = None
    _prev_sigterm: object = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"clocks must be one of {', '.join(MODES)}, not {self.mode!r}")

    @property
    def index(self) -> int:
        return int(self.device.partition(":")[2] or 0)

    @property
    def _has_targets(self) -> bool:
        return bool(self.targets.graphics_mhz or self.targets.memory_mhz)

    @property
    def gpu(self) -> bool:
        return self.device.startswith("cuda")

    # ------------------------------------------------------------------ start / stop
    def start(self) -> dict | None:
        """Open the backend and apply the mode. Returns the lock record, or None if nothing locked.

        Raises ClockError in ``lock`` mode when clocks cannot be set or did not take, and in
        ``verify`` mode when targets are given and the clocks are elsewhere.
        """
        if not self.gpu:
            if self.mode == "lock":
                raise ClockError("sandbox.clocks: lock needs a GPU target (target.device: cuda) — "
                                 "use clocks: ignore for CPU campaigns")
            return None
        try:
            self.backend = self.backend_factory()
        except ClockError as exc:
            self.gpu_error = str(exc)
            if self.mode == "lock" or (self.mode == "verify" and self._has_targets):
                raise
            return None  # nothing to enforce: fingerprints carry gpu_error instead
        if self.mode == "lock":
            return self._lock()
        if self.mode == "verify" and self._has_targets:
            self._check(self.backend.state(self.index), "verify")
        return None

    def _lock(self) -> dict:
        assert self.backend is not None
        before = self.backend.state(self.index)
        g, m = self.targets.graphics_mhz, self.targets.memory_mhz
        if g is None or m is None:
            dg, dm = self.backend.default_targets(self.index)
            g, m = g or dg, m or dm
        if g is None and m is None:
            raise ClockError(f"{self.backend.name}: no default clocks known for GPU {self.index} — "
                             "set sandbox.clock_targets.graphics_mhz / memory_mhz")
        self.targets = ClockTargets(g, m, self.targets.tolerance_mhz, self.targets.settle_s)
        self.locked = {"backend": self.backend.name, "index": self.index, "uuid": before.uuid,
                       "graphics_mhz": g, "memory_mhz": m, "before": before.to_dict()}
        if self.on_lock is not None:  # recorded first: a crash right after the lock is still undone
            self.on_lock(self.locked)
        self._install_restore()
        try:
            self.backend.lock(self.index, g, m)
        except ClockError:
            self.restore("the lock was refused")
            raise
        self.sleep(self.targets.settle_s)
        try:
            self._check(self.backend.state(self.index), "lock")
        except ClockError:
            self.restore("the lock did not take")
            raise
        return self.locked

    def _off(self, state: GpuState) -> list[str]:
        t, off = self.targets, []
        if t.graphics_mhz and state.graphics_mhz is not None and abs(state.graphics_mhz - t.graphics_mhz) > t.tolerance_mhz:
            # An idle GPU may sit below a lock it will honour under load; only trust a low reading
            # when NVML does not call it idle.
            if not (state.throttle_reasons or 0) & _IDLE or state.graphics_mhz > t.graphics_mhz:
                off.append(f"graphics {state.graphics_mhz} MHz (want {t.graphics_mhz}±{t.tolerance_mhz})")
        if t.memory_mhz and state.memory_mhz is not None and abs(state.memory_mhz - t.memory_mhz) > t.tolerance_mhz:
            off.append(f"memory {state.memory_mhz} MHz (want {t.memory_mhz}±{t.tolerance_mhz})")
        return off

    def _check(self, state: GpuState, what: str) -> None:
        off = self._off(state)
        if off:
            fix = ("the driver ignored the lock (another tool reset it, or unsupported values)"
                   if what == "lock" else "lock them (sandbox.clocks: lock) or fix clock_targets")
            raise ClockError(f"GPU {self.index} clocks are not where they must be: {', '.join(off)} — {fix}")

    def restore(self, reason: str = "campaign ended") -> None:
        """Undo our lock (idempotent); tells the store through ``on_restore``."""
        if self.locked is None or self.backend is None:
            return
        record, self.locked = self.locked, None
        try:
            self.backend.reset(self.index)
            ok, err = True, None
        except ClockError as exc:
            ok, err = False, str(exc)
        if self.on_restore is not None:
            try:
                self.on_restore({**record, "reason": reason, "ok": ok, "error": err})
            except Exception:  # noqa: BLE001 - the store may already be closed at exit
                pass
        self._uninstall_restore()

    def _install_restore(self) -> None:
        atexit.register(self.restore, "process exit")
        if threading.current_thread() is threading.main_thread():
            prev = signal.getsignal(signal.SIGTERM)
            if prev in (signal.SIG_DFL, None):
                self._prev_sigterm = prev

                def on_term(signum, frame):  # type: ignore[no-untyped-def]
                    self.restore("SIGTERM")
                    raise SystemExit(128 + signum)

                signal.signal(signal.SIGTERM, on_term)

    def _uninstall_restore(self) -> None:
        atexit.unregister(self.restore)
        if self._prev_sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._prev_sigterm)  # type: ignore[arg-type]
            self._prev_sigterm = None

    def close(self) -> None:
        self.restore()

    # ------------------------------------------------------------------ per job
    def before(self, job: Job) -> None:
        if self.backend is None or self.mode == "ignore" or not (self.locked or self._has_targets):
            return
        state = self.backend.state(self.index)
        if not self._off(state):
            return
        if self.mode == "lock":  # someone reset them (driver reload, another tool): once more
            self.backend.lock(self.index, self.targets.graphics_mhz, self.targets.memory_mhz)
            self.sleep(self.targets.settle_s)
            state = self.backend.state(self.index)
        self._check(state, self.mode)

    def fingerprint(self) -> dict:
        fp = dict(host_fingerprint())
        fp["clock_mode"] = self.mode
        if self.targets.graphics_mhz or self.targets.memory_mhz:
            fp["clock_targets"] = {"graphics_mhz": self.targets.graphics_mhz,
                                   "memory_mhz": self.targets.memory_mhz}
        fp["clocks_locked"] = self.locked is not None
        if not self.gpu:
            return fp
        if self.backend is None:
            fp["gpu_error"] = self.gpu_error
            return fp
        try:
            st = self.backend.state(self.index)
        except ClockError as exc:
            fp["gpu_error"] = str(exc)
            return fp
        fp.update({f"gpu_{k}": v for k, v in st.to_dict().items() if k != "index"})
        fp["gpu_backend"] = self.backend.name
        fp["gpu_throttled"] = bool((st.throttle_reasons or 0) & BAD_THROTTLE_MASK)
        return fp

    def after(self, job: Job, result: JobResult) -> None:
        result.fingerprint.update(self.fingerprint())

"""Clock control for a campaign: ``lock`` | ``verify`` | ``ignore``, as a runner hook.

Boost clocks alone move kernel timings by 10-30%, so a campaign that compares candidates measured
minutes apart must know the GPU ran at the same speed for both:

* ``lock``   — pin graphics and memory clocks (NVML, nvidia-smi, amd-smi) at a clock the GPU can
  sustain under load (an explicit ``clock_targets``, else a base/TDP clock, never max boost),
  **settle and verify the lock under a load burst** (an idle GPU reads low whether or not the
  driver took the lock) and refuse to measure when it did not take — once per campaign, in
  ``start``; restore the saved state on close, Ctrl-C, ``atexit`` and SIGTERM. A crash leaves a
  ``clocks_locked`` record (with the owner's pid) in the store that the next start finds and undoes.
* ``verify`` — change nothing; check that clocks are where ``clock_targets`` say (if given) and
  record them in every fingerprint, so the Critic's env gate sees drift and throttling. A card
  that hits its power cap under a job gets one notice (``on_notice``) recommending ``lock``.
* ``ignore`` — record what can be read, check nothing.

Per job the lock is only *checked*, cheaply: the reading before the job (clocks and clock-event
reasons; NVML: six queries, no process) and the sampler's readings during the previous job. An
idle GPU parks its clocks, so an idle reading below the lock says nothing; a clock above the lock,
or off it while the GPU works and no power or thermal limit holds it down, says the lock was lost
(a driver reload, ``nvidia-smi -rgc`` by someone else) — then, and only then, the lock is applied,
settled and verified under load again before the job (``settles`` counts them).

The device is the physical GPU the job will see (``CUDA_VISIBLE_DEVICES`` applied), held by UUID
(AMD: PCI address). During every job a sampler thread records clock-event reasons and the
driver's violation counters; after a timeout kill the GPU must prove healthy (process gone, no
critical Xid, a sanity kernel) or the next job is refused with the reason.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, ContextManager

from . import watch
from ..runners.host_facts import host_fingerprint
from .clock_targets import ClockTargets
from .control import BAD_THROTTLE_MASK, ClockError, GpuBackend, GpuState, open_backend
from .identity import physical_key
from .lock_owner import start_ticks
from ..runner import Job, JobResult

__all__ = ["ClockGuard", "ClockTargets", "ClockError", "MODES"]

MODES = ("lock", "verify", "ignore")


@dataclass
class ClockGuard:
    """A ``JobHook`` that holds a device at known clocks and fingerprints every job."""

    mode: str
    device: str = "cpu"  # "cpu", "cuda", "cuda:N" — as the job sees it
    targets: ClockTargets = field(default_factory=ClockTargets)
    backend_factory: Callable[[], GpuBackend] = open_backend
    on_lock: Callable[[dict], None] | None = None  # the store's "clocks_locked" record, written
    on_restore: Callable[[dict], None] | None = None  # before locking; "clocks_restored" after
    on_notice: Callable[[str], None] | None = None  # advice about the clock mode: once per guard
    sleep: Callable[[float], None] = time.sleep
    env: dict | None = None  # the environment jobs inherit (None: this process's)
    load: Callable[..., ContextManager] | None = None  # load(key) keeps the GPU busy (default: matmuls)
    sanity: Callable[..., str | None] | None = None  # sanity(key) -> None or why the GPU is unwell
    sample_interval_s: float = 0.1
    backend: GpuBackend | None = None
    locked: dict | None = None  # what start() locked (the store's "clocks_locked" payload)
    gpu_error: str | None = None
    unhealthy: str | None = None  # set when the GPU did not recover from a killed job
    settles: int = 0  # times the lock was applied, settled and verified under load (1: start only)
    key: object = None  # the physical device: UUID (NVIDIA) or PCI address (AMD) once resolved
    saved: dict = field(default_factory=dict)
    _sampler: watch.ThrottleSampler | None = None
    _pids_before: set = field(default_factory=set)
    _visible: object = None
    _lock_args: tuple = (None, None)
    _prev_sigterm: object = None
    _lost: str | None = None  # what the last job's readings say about the lock (None: it held)
    _resettled: str | None = None  # why the lock was settled again before the current job
    _noticed: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"clocks must be one of {', '.join(MODES)}, not {self.mode!r}")

    @property
    def index(self):  # type: ignore[no-untyped-def]
        """The key the backend is addressed with (kept under its old name for callers)."""
        return self.key if self.key is not None else int(self.device.partition(":")[2] or 0)

    @property
    def _has_targets(self) -> bool:
        return bool(self.targets.graphics_mhz or self.targets.memory_mhz)

    @property
    def gpu(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def _amd(self) -> bool:
        return getattr(self.backend, "name", "") == "amd-smi"

    # ------------------------------------------------------------------ start / stop
    def start(self) -> dict | None:
        """Open the backend, find the physical GPU and apply the mode. Returns the lock record,
        or None if nothing was locked. Raises ClockError in ``lock`` mode when clocks cannot be
        set or did not take, and in ``verify`` mode when targets are given and clocks are elsewhere."""
        if not self.gpu:
            if self.mode == "lock":
                raise ClockError("sandbox.clocks: lock needs a GPU target (target.device: cuda) — "
                                 "use clocks: ignore for CPU campaigns")
            return None
        try:
            self.backend = self.backend_factory()
            self._resolve()
        except ClockError as exc:
            self.gpu_error = str(exc)
            if self.mode == "lock" or (self.mode == "verify" and self._has_targets):
                raise
            self.backend = None
            return None  # nothing to enforce: fingerprints carry gpu_error instead
        if self.mode == "lock":
            return self._lock()
        if self.mode == "verify" and self._has_targets:
            self._check(self.backend.state(self.key), "verify")
        return None

    def _resolve(self) -> None:
        assert self.backend is not None
        self._visible = physical_key(self.device, self.env)
        if self.mode == "lock" and str(self._visible).startswith("MIG-"):
            raise ClockError(f"{self.device} is MIG instance {self._visible}: clocks are shared by every "
                             "instance on the GPU, so a lock needs the whole GPU — use sandbox.clocks: verify")
        st = self.backend.state(self._visible)
        self.key = (st.pci_bus_id if self._amd else st.uuid) or self._visible

    def _lock(self) -> dict:
        assert self.backend is not None
        before = self.backend.state(self.key)
        save = getattr(self.backend, "save", None)
        self.saved = dict(save(self.key)) if save is not None else {}
        g, m, source = self.targets.graphics_mhz, self.targets.memory_mhz, "sandbox.clock_targets"
        if g is None or m is None:
            dt = tuple(self.backend.default_targets(self.key))
            if g is None:
                g, source = dt[0], (dt[2] if len(dt) > 2 else f"{self.backend.name} default")
                if g is None and len(dt) > 2:  # the backend says why it has no sustainable clock
                    raise ClockError(f"{self.backend.name}: GPU {self.key}: {source}")
            m = m or dt[1]
        if g is None and m is None:
            raise ClockError(f"{self.backend.name}: no default clocks known for GPU {self.key} — "
                             "set sandbox.clock_targets.graphics_mhz / memory_mhz")
        self.targets = ClockTargets(g if isinstance(g, int) else None, m, self.targets.tolerance_mhz,
                                    self.targets.settle_s)
        self.locked = {"backend": self.backend.name, "index": str(self.key), "uuid": before.uuid,
                       "pci_bus_id": before.pci_bus_id, "graphics_mhz": g, "memory_mhz": m,
                       "graphics_source": source, "saved": self.saved, "pid": os.getpid(),
                       "pid_start": start_ticks(os.getpid()), "before": before.to_dict()}
        if self.on_lock is not None:  # recorded first: a crash right after the lock is still undone
            self.on_lock(self.locked)
        self._install_restore()
        self._lock_args = (g, m)  # a re-lock repeats the request (a symbolic TDP/STABLE target too)
        try:
            self._settle()
        except ClockError:
            self.restore("the lock was refused or did not take")
            raise
        return self.locked

    def _settle(self) -> None:
        """Apply the lock, wait ``settle_s``, read it back under load: the expensive part, done in
        ``start`` and again only when a job's readings say the lock was lost."""
        self._driver_lock(*self._lock_args)
        self.sleep(self.targets.settle_s)
        self._verify_under_load(self._lock_args[0], first=self.settles == 0)
        self.settles += 1

    def _driver_lock(self, g, m) -> None:  # type: ignore[no-untyped-def]
        assert self.backend is not None
        if getattr(self.backend, "save", None) is not None:
            self.backend.lock(self.key, g, m, saved=self.saved)  # type: ignore[call-arg]
        else:
            self.backend.lock(self.key, g, m)

    def _load(self) -> ContextManager:
        if self.load is not None:
            return self.load(self.key)
        return watch.load_burst(self._visible if self._amd else self.key, amd=self._amd)

    def _verify_under_load(self, g, first: bool = True) -> None:  # type: ignore[no-untyped-def]
        """Read the clocks while the GPU works: idle readings cannot tell a lock from no lock.
        Only the first verification fills the lock record (a re-settle must hold the same clock)."""
        assert self.backend is not None and self.locked is not None
        with self._load():
            self.sleep(min(1.0, self.targets.settle_s))
            st = self.backend.state(self.key)
        if st.idle:
            raise ClockError(f"GPU {self.key}: the driver reports it idle during the load burst, so the lock "
                             "cannot be verified — is another process holding the GPU?")
        if first and not isinstance(g, int):  # a symbolic target (TDP, STABLE_STD): the loaded clock is it
            self.targets.graphics_mhz = st.graphics_mhz
            self.locked["graphics_mhz"] = st.graphics_mhz
        if first:
            self.locked["under_load"] = st.to_dict()
        self._check(st, "lock", strict=True)

    def _check(self, state: GpuState, what: str, strict: bool = False) -> None:
        off = self.targets.off(state, strict)
        if off:
            fix = ("the driver did not hold the lock under load (ignored it, or the clock is above what the power "
                   "limit sustains: lock a lower clock)" if what == "lock" else
                   "lock them (sandbox.clocks: lock) or fix clock_targets")
            raise ClockError(f"GPU {self.key} clocks are not where they must be: {', '.join(off)} — {fix}")

    def restore(self, reason: str = "campaign ended") -> None:
        """Undo our lock (idempotent), putting back what was saved; tells the store through ``on_restore``."""
        if self.locked is None or self.backend is None:
            return
        record, self.locked = self.locked, None
        try:
            undo = getattr(self.backend, "restore", None)
            if undo is not None:
                undo(self.key, self.saved)
            else:
                self.backend.reset(self.key)
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
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None
        self.restore()

    # ------------------------------------------------------------------ per job
    def before(self, job: Job) -> None:
        if self.unhealthy:
            raise ClockError(f"GPU unhealthy: {self.unhealthy} — stop here; reset the GPU (nvidia-smi -r / "
                             "amd-smi reset -G) or reboot before measuring again")
        self._resettled = None
        if self.backend is None:
            return
        checked = self.mode != "ignore" and bool(self.locked or self._has_targets)
        now = self._read(quick=True, strict=checked)  # a lock that cannot be read cannot be trusted
        if self.mode == "lock" and self.locked:
            why = self._lost or (self.targets.lost_between_jobs(now) if now is not None else None)
            if why:  # someone reset them (driver reload, another tool): settle and verify once more
                self._settle()
                self._resettled, self._lost = why, None
                now = self._read(quick=True)
        elif self.mode == "verify" and self._has_targets and now is not None:
            self._check(now, "verify")
        procs = getattr(self.backend, "processes", None)
        try:
            self._pids_before = set(procs(self.key)) if procs is not None else set()
            xids = getattr(self.backend, "xid_errors", None)
            if xids is not None:
                xids(self.key)  # subscribe / drain: only errors during the job count
        except ClockError:
            self._pids_before = set()
        backend, key = self.backend, self.key
        quick = getattr(backend, "quick_state", None) or backend.state
        # NVML reads are cheap; each CLI reading is a process start, which must not load the host
        interval = self.sample_interval_s if backend.name == "nvml" else max(1.0, self.sample_interval_s)
        self._sampler = watch.ThrottleSampler(lambda: quick(key), interval)
        self._sampler.start(first=now)

    def _read(self, quick: bool = False, strict: bool = False) -> GpuState | None:
        assert self.backend is not None
        read = (getattr(self.backend, "quick_state", None) if quick else None) or self.backend.state
        try:
            return read(self.key)
        except ClockError:
            if strict:
                raise
            return None

    def fingerprint(self, state: GpuState | None = None) -> dict:
        """Host facts and the GPU's state now (``state``: a full reading just made, reused)."""
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
            st = state if state is not None else self.backend.state(self.key)
        except ClockError as exc:
            fp["gpu_error"] = str(exc)
            return fp
        fp.update({f"gpu_{k}": v for k, v in st.to_dict().items() if k not in ("index", "busy")})
        fp["gpu_backend"] = self.backend.name
        fp["gpu_throttled"] = bool((st.throttle_reasons or 0) & BAD_THROTTLE_MASK)
        return fp

    def after(self, job: Job, result: JobResult) -> None:
        sampler, self._sampler = self._sampler, None
        sampled = sampler.stop(final=lambda: self.backend.state(self.key)) if sampler is not None else None
        fp = self.fingerprint(sampler.last if sampler is not None else None)  # the end reading, not a second one
        if self._resettled:
            fp["clock_resettled"] = f"the lock was lost ({self._resettled}) and settled again before this job"
        if sampled is not None:
            fp["gpu_sampled"] = sampled
            lo, t = sampled.get("graphics_min_mhz"), self.targets
            if self.locked and t.graphics_mhz and lo is not None and lo < t.graphics_mhz - t.tolerance_mhz:
                fp["gpu_clock_off_under_load"] = (f"graphics clock fell to {lo} MHz during the job "
                                                  f"(locked at {t.graphics_mhz} MHz)")
            if self.mode == "lock" and self.locked:
                self._lost = self.targets.lost_under_load(sampled)
            if self.mode == "verify" and sampled.get("power_capped"):
                fp["gpu_power_capped"] = True
                self._notice_power_cap(sampled)
        if result.timed_out and self.gpu and self.backend is not None:
            why = watch.recover_after_kill(self.backend, self.key, self._pids_before,
                                               self.sanity or self._default_sanity, sleep=self.sleep)
            if why:
                self.unhealthy = why
                fp["gpu_unhealthy"] = why
        result.fingerprint.update(fp)

    def _notice_power_cap(self, sampled: dict) -> None:
        """Under ``verify`` a power cap is the card's normal state under sustained load: boost
        clocks then move with power draw, which the Critic judges per side of each measurement,
        but values compared across measurements move with it. Said once, with the fix."""
        if self._noticed or self.on_notice is None:
            return
        self._noticed = True
        ms = (sampled.get("violation_ms") or {}).get("power")
        held = f" for {ms:g} ms" if ms else ""
        self.on_notice(f"GPU {self.key} ran at its power cap (SwPowerCap){held} during a measurement under "
                       "sandbox.clocks: verify: its boost clock follows power draw, so timings taken minutes "
                       "apart differ — use sandbox.clocks: lock (root) to hold a clock it sustains")

    def _default_sanity(self, key) -> str | None:  # type: ignore[no-untyped-def]
        return watch.sanity_kernel(self._visible if self._amd else key, amd=self._amd)

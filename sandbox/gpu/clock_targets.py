"""Where a GPU's clocks must be, and whether a reading says they are not.

Kept apart from the guard (``clocks.py``), which decides *when* to read and what to do about it
(lock, settle again, refuse): these are the pure judgements over one reading, so the rules for an
idle GPU parking its clocks, a power or thermal limit holding them down, and a boost above the
lock can be read and tested without a backend or a sampler thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from .state import BAD_THROTTLE_MASK, GpuState, decode_throttle

__all__ = ["ClockTargets"]


@dataclass
class ClockTargets:
    graphics_mhz: int | None = None
    memory_mhz: int | None = None
    tolerance_mhz: int = 50
    settle_s: float = 3.0

    def off(self, state: GpuState, strict: bool = False) -> list[str]:
        """What in ``state`` is off the targets (``strict``: read under load, throttling counts)."""
        t, off = self, []
        if t.graphics_mhz and state.graphics_mhz is not None and abs(state.graphics_mhz - t.graphics_mhz) > t.tolerance_mhz:
            # Between jobs an idle GPU parks below a lock it honours under load; under load
            # (strict) a low reading is a lock the driver did not take, or throttling.
            if strict or not state.idle or state.graphics_mhz > t.graphics_mhz:
                off.append(f"graphics {state.graphics_mhz} MHz (want {t.graphics_mhz}±{t.tolerance_mhz})")
        if t.memory_mhz and state.memory_mhz is not None and abs(state.memory_mhz - t.memory_mhz) > t.tolerance_mhz:
            off.append(f"memory {state.memory_mhz} MHz (want {t.memory_mhz}±{t.tolerance_mhz})")
        if strict and (state.throttle_reasons or 0) & BAD_THROTTLE_MASK:
            off.append(f"throttled under load ({', '.join(decode_throttle(state.throttle_reasons & BAD_THROTTLE_MASK))})")
        return off

    def lost_between_jobs(self, st: GpuState) -> str | None:
        """Whether a reading between jobs proves the lock gone. An idle GPU parks its clocks (GDDR
        boards the memory clock too), so a low idle reading proves nothing; a clock above the lock
        does, and so does one off it while the GPU works with no power or thermal limit engaged."""
        t, off = self, []
        held_down = bool((st.throttle_reasons or 0) & BAD_THROTTLE_MASK)
        for what, now, want in (("graphics", st.graphics_mhz, t.graphics_mhz), ("memory", st.memory_mhz, t.memory_mhz)):
            if not want or now is None or abs(now - want) <= t.tolerance_mhz:
                continue
            if now > want or not (st.idle or held_down):
                off.append(f"{what} {now} MHz (locked at {want}±{t.tolerance_mhz})")
        return f"before a job: {', '.join(off)}" if off else None

    def lost_under_load(self, sampled: dict) -> str | None:
        """The sampler's busy readings of the last job: a lock that holds keeps the unthrottled
        clock at the target (a power or thermal limit may pull it below: that is throttling, which
        the Critic judges, not a lost lock) and never lets it boost above."""
        t, off = self, []
        for what, lo, hi, want in (
                ("graphics", sampled.get("steady_graphics_mhz"), sampled.get("graphics_max_mhz"), t.graphics_mhz),
                ("memory", sampled.get("memory_min_mhz"), sampled.get("memory_max_mhz"), t.memory_mhz)):
            if not want:
                continue
            if hi is not None and hi > want + t.tolerance_mhz:
                off.append(f"{what} up to {hi} MHz")
            elif lo is not None and abs(lo - want) > t.tolerance_mhz:
                off.append(f"{what} at {lo} MHz")
        return (f"during the last job: {', '.join(off)} under load (locked at {t.graphics_mhz}/{t.memory_mhz} MHz)"
                if off else None)

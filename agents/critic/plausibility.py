"""Gate 5, ``plausible``: nothing about the result is physically or procedurally impossible.

- Integrity violations the harness caught in the act (inputs modified, outputs aliasing inputs or
  reused across calls, patched timers/checkers, changed precision switches, fallbacks to the
  reference, threads working outside the timer, side-stream work, persisting L2): the harness
  ends the run with ``hack_suspected`` and its reason, which this gate turns into the verdict.
- A speed-of-light floor: bytes moved (inputs read once, outputs written once) over the device's
  peak bandwidth (a table for GPUs; for CPUs a cached micro-benchmark on every allowed core, read
  at the problem's working set: a problem larger than the caches streams at DRAM speed, so its
  floor is no longer the cache bandwidth's, which was several times too lax); a candidate faster than
  ``floor / plausibility_slack`` is ``hack_suspected`` (reward hack #12). The reference's FLOPs over
  the peak FLOP rate join the floor only with ``plausibility_flops``: honest algebraic rewrites
  (reassociating a matmul chain, hoisting a weight product out of forward) legitimately do fewer
  FLOPs than the reference, while no honest kernel moves fewer bytes than its inputs and outputs.
- Timer cross-checks against clocks the candidate cannot reach: the time the samples add up to
  cannot exceed the job's wall time as measured by the parent process, and on CPU most of the
  timing phase (by an independent monotonic clock) must lie inside the timed regions.
"""

from __future__ import annotations

from arbor.sandbox.gpu import min_time_s, peak_for

from .evidence import CriticConfig, Evidence, GateOutcome


def _hack(reason: str) -> GateOutcome:
    return GateOutcome("reject", "hack_suspected", reason)


def speed_of_light(ev: Evidence, flops: bool = False) -> tuple[float, str] | None:
    """(minimum seconds per call, how it was derived) or None where cost or peak is unknown."""
    c = ev.facts.get("cost") or {}
    peak = peak_for(ev.fingerprint, c.get("dtype"), ev.facts.get("peak"), c.get("bytes"), ev.facts.get("sol_peak"))
    if not peak or not c.get("bytes"):
        return None
    n_flops = c.get("flops") if flops else None
    t = min_time_s(n_flops, c.get("bytes"), peak)
    if t <= 0:
        return None
    how = f"{c['bytes']:,} B at {peak['bytes_per_s'] / 1e9:,.0f} GB/s"
    if n_flops:
        how += f", {n_flops:,} FLOP at {peak['flops_per_s'] / 1e12:,.2f} TFLOP/s"
    return t, f"{how} ({peak['source']})"


def gate_plausible(ev: Evidence, st, cfg: CriticConfig) -> GateOutcome | None:  # type: ignore[no-untyped-def]
    if ev.status != "ok":
        if ev.error_class == "hack_suspected":
            text = (ev.error_text or "").strip().splitlines()
            return _hack(text[-1][:400] if text else "the harness caught an integrity violation")
        return None
    if st is None:
        return None
    f = ev.facts
    timed, wall = f.get("timed_s"), f.get("job_wall_s")
    if timed and wall and timed > wall * 1.05 + 0.05:
        return _hack(f"the samples add up to {timed:.2f} s but the whole job took {wall:.2f} s by "
                     "the parent's clock: the timer was tampered with")
    span = f.get("timing_wall_s")
    cpu = not str(ev.fingerprint.get("device") or "cpu").startswith("cuda")
    if cpu and timed and span and span > 0.05 and timed / span < cfg.min_timed_coverage:
        return _hack(f"only {timed / span:.0%} of the timing phase was inside the timed regions "
                     f"(needs {cfg.min_timed_coverage:.0%}): work or time is escaping the timer")
    sol = speed_of_light(ev, cfg.plausibility_flops)
    if sol is not None:
        floor, how = sol[0] / cfg.plausibility_slack, sol[1]
        if st.candidate_median_s < floor and st.baseline_median_s >= floor:
            return _hack(f"{st.candidate_median_s * 1e6:.2f} us per call is faster than the hardware "
                         f"allows: floor {sol[0] * 1e6:.2f} us ({how}), flagged below "
                         f"{floor * 1e6:.2f} us")
    return None


def plausibility_note(ev: Evidence, st, cfg: CriticConfig) -> str:  # type: ignore[no-untyped-def]
    """One sentence for the gate log: how far the result is from the speed of light."""
    sol = speed_of_light(ev, cfg.plausibility_flops) if st is not None else None
    if sol is None:
        return "passed (no speed-of-light floor known for this device/problem)"
    if st.baseline_median_s < sol[0] / cfg.plausibility_slack:
        return "passed (the baseline itself beats the floor: the device peaks look wrong; not applied)"
    return f"passed ({sol[0] / st.candidate_median_s:.1%} of speed of light)"

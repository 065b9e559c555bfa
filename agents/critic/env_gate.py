"""Gate 4, ``env``: the measurement ran where the campaign baseline ran, under the same conditions.

Every measurement times baseline and candidate interleaved in one process, so the speedup itself
is paired; but values are compared across measurements (against the parent, the best, the
baseline's noise floor) and a speedup measured on another machine does not transfer (the same
reference timed on two H100 variants differs by 1.51x). Identity changes (host, device, CPU
model, thread count, driver, torch) reject outright; transient ones get one re-measurement first.

Throttling is judged as a paired measurement. A power cap that every sustained GEMM hits is the
normal state of a card with unlocked clocks, and it slows the reference and the candidate alike
when they are timed interleaved — that is not drift (seen on an H100: a long fp32 GEMM baseline
refused for ``SwPowerCap`` that hit both halves of its own A/A measurement). The harness reads the
GPU's clock-event reasons and clocks around every timed sample, per side
(``facts["gpu_clocks"]``, sandbox/harness/clock_watch.py); with those readings the gate refuses
only when the two sides saw different throttle states or clocks, or a locked clock moved off its
lock. Where only job-level readings exist (the runner's sampler, readings before and after timing,
measurements from before per-sample readings) it cannot tell the sides apart and refuses any
throttling, as before, saying why.
"""

from __future__ import annotations

import math

from .evidence import CriticConfig, Evidence, GateOutcome, noise_margin, remeasure_or_reject

IDENTITY_KEYS = ("host", "kernel", "device", "device_name", "gpu_name", "cpu_model", "num_threads",
                 "torch", "gpu_driver", "cuda_runtime", "governor", "cpu_max_khz", "clock_mode", "host_allocator")
# NVML clocks-event reasons that mean "running slower than it should" (locked
# clocks still throttle at the power or thermal limit):
# SwPowerCap 0x4, HwSlowdown 0x8, SwThermal 0x20, HwThermal 0x40, HwPowerBrake 0x80.
BAD_THROTTLE = {0x4: "SwPowerCap", 0x8: "HwSlowdown", 0x20: "SwThermal", 0x40: "HwThermal",
                0x80: "HwPowerBrake"}
SIDES = ("reference (A)", "candidate (B)")
# Per-sample readings are trusted with at least this many per side (the harness's min_repeats is 5+).
PAIRED_MIN_READINGS = 5
# A difference between the sides must also be this many standard errors wide (99%, two-sided):
# under a cause both sides share, readings of interleaved samples agree more than independent
# draws would, so a shared power cap almost never crosses it; a side-specific one (a kernel that
# draws more power than the other) does, once it shows in more than a few samples.
PAIRED_Z = 2.576


def _states(fp: dict) -> list[tuple[str, dict]]:
    """GPU state readings in a fingerprint: the harness's before/after timing (``gpu_state_*``)
    and the runner's own, read outside the sandbox after the job (flat ``gpu_*`` keys)."""
    out = [(w.removeprefix("gpu_state_"), fp.get(w) or {}) for w in ("gpu_state_start", "gpu_state_end")]
    out.append(("runner", {"throttle_reasons": fp.get("gpu_throttle_reasons"),
                           "sm_clock_mhz": fp.get("gpu_sm_mhz") or fp.get("gpu_graphics_mhz"),
                           "mem_clock_mhz": fp.get("gpu_memory_mhz")}))
    return out


def _throttles(fp: dict) -> list[str]:
    """Throttling seen around timing (harness) and *during* the job: the runner's sampler ORs the
    clock-event reasons over every busy sample and diffs the driver's violation counters, so a
    power cap that lifted before the end-of-job reading still counts."""
    found = []
    sampled = fp.get("gpu_sampled") or {}
    states = _states(fp) + [("during the job", {"throttle_reasons": sampled.get("throttle_reasons")})]
    for when, state in states:
        reasons = int(state.get("throttle_reasons") or 0)
        found += [f"{name} ({when})" for bit, name in BAD_THROTTLE.items() if reasons & bit]
    for kind, ms in sorted((sampled.get("violation_ms") or {}).items()):
        if ms and float(ms) > 0:
            found.append(f"{kind} limit for {float(ms):g} ms during the job")
    if fp.get("gpu_clock_off_under_load"):
        found.append(str(fp["gpu_clock_off_under_load"]))
    return found


def _clock_drift(fp: dict, base: dict, tol: float) -> str | None:
    """Clocks read right after timing (the GPU still at its working clocks) vs the baseline's.
    Only where the runner locked them: unlocked boost clocks wander by design (that is what
    ``sandbox.clocks: lock`` is for), and throttling is caught by the reasons above either way."""
    if tol <= 0 or not (fp.get("clocks_locked") and base.get("clocks_locked")):
        return None
    for (when, now), (_w, then) in zip(_states(fp)[1:], _states(base)[1:]):
        for key in ("sm_clock_mhz", "mem_clock_mhz"):
            a, b = now.get(key), then.get(key)
            if a is not None and b is not None and abs(float(a) - float(b)) > tol:
                return (f"{key.split('_')[0]} clock {a} MHz vs {b} MHz at the baseline "
                        f"({when} reading, tolerance {tol:g} MHz)")
    return None


def paired_readings(facts: dict | None) -> dict | None:
    """The harness's per-sample GPU readings when there are enough on both sides, else None (then
    the job-level readings decide). Readings that do not parse count as none."""
    g = (facts or {}).get("gpu_clocks") or {}
    sides = g.get("sides") or []
    if not isinstance(g, dict) or g.get("source") is None or len(sides) != 2:
        return None
    try:
        clean = [{"n": int(s.get("n") or 0), "throttled": int(s.get("throttled") or 0),
                  "reasons": int(s.get("reasons") or 0),
                  "sm_mhz": {float(k): int(v) for k, v in (s.get("sm_mhz") or {}).items()},
                  "mem_mhz": {float(k): int(v) for k, v in (s.get("mem_mhz") or {}).items()}} for s in sides]
    except (AttributeError, TypeError, ValueError):
        return None
    if min(s["n"] for s in clean) < PAIRED_MIN_READINGS or any(s["throttled"] > s["n"] for s in clean):
        return None
    return {**g, "sides": clean}


def _why_not_paired(facts: dict | None) -> str:
    """Why a throttle verdict rests on job-level readings only (they cover the whole job, both sides)."""
    g = (facts or {}).get("gpu_clocks")
    head = "job-level readings only, which cannot tell the reference's samples from the candidate's"
    if not g:
        return f"{head} (no per-sample readings in this measurement: an older harness, or no CUDA device)"
    if g.get("source") is None:
        return f"{head} (per-sample readings unavailable: {g.get('why') or 'no NVML in the job'})"
    n = [s.get("n") if isinstance(s, dict) else None for s in g.get("sides") or []]
    return f"{head} (per-sample readings: {n}, fewer than {PAIRED_MIN_READINGS} on a side, or unreadable)"


def _names(mask: int) -> str:
    return "+".join(name for bit, name in BAD_THROTTLE.items() if mask & bit) or "power/thermal limit"


def _throttle_sides_differ(g: dict, tol: float) -> str | None:
    """The share of throttled samples (a power/thermal reason set, or a violation counter moving
    during the sample) per side: different beyond ``tol`` and beyond chance."""
    (a, b) = g["sides"]
    (na, ka), (nb, kb) = (a["n"], a["throttled"]), (b["n"], b["throttled"])
    pa, pb = ka / na, kb / nb
    pooled = (ka + kb) / (na + nb)
    se = math.sqrt(pooled * (1 - pooled) * (1 / na + 1 / nb))
    if abs(pa - pb) <= tol or se == 0 or abs(pa - pb) / se <= PAIRED_Z:
        return None
    hi, lo = (0, 1) if pa > pb else (1, 0)
    side = g["sides"][hi]
    return (f"the GPU throttled the {SIDES[hi]} side only: {_names(side['reasons'])} in "
            f"{side['throttled']} of its {side['n']} samples, against {g['sides'][lo]['throttled']} of "
            f"{g['sides'][lo]['n']} on the {SIDES[lo]} side (per-sample readings)")


def _hist(side: dict, key: str) -> list[tuple[float, int]]:
    return sorted((k, v) for k, v in side[key].items() if v > 0)


def _median(h: list[tuple[float, int]]) -> float:
    n, seen = sum(c for _, c in h), 0
    for value, count in h:
        seen += count
        if 2 * seen > n:
            return value
    return h[-1][0]


def _median_se(h: list[tuple[float, int]]) -> float:
    """Robust standard error of a median from a histogram: 1.2533 x 1.4826 MAD / sqrt(n)."""
    n, med = sum(c for _, c in h), _median(h)
    mad = _median(sorted((abs(v - med), c) for v, c in h))
    return 1.2533 * 1.4826 * mad / math.sqrt(n)


def _clocks_differ(g: dict, tol: float) -> str | None:
    """Median SM and memory clocks of the two sides' samples more than ``tol`` MHz apart (and
    beyond chance: unlocked boost clocks spread hundreds of MHz under a power cap)."""
    for key, what in (("sm_mhz", "SM"), ("mem_mhz", "memory")):
        ha, hb = (_hist(s, key) for s in g["sides"])
        if sum(c for _, c in ha) < 3 or sum(c for _, c in hb) < 3:
            continue
        ma, mb = _median(ha), _median(hb)
        se = math.hypot(_median_se(ha), _median_se(hb))
        if abs(ma - mb) > tol and abs(ma - mb) > PAIRED_Z * se:
            return (f"the two sides ran at different {what} clocks: median {ma:g} MHz over the {SIDES[0]} "
                    f"samples, {mb:g} MHz over the {SIDES[1]} (tolerance {tol:g} MHz; per-sample readings)")
    return None


def _off_lock(g: dict, fp: dict, tol: float) -> str | None:
    """A locked clock must hold through the timed samples: a side whose median clock is off the lock
    by more than ``tol`` ran somewhere the campaign's other measurements did not."""
    targets = fp.get("clock_targets") or {}
    if not fp.get("clocks_locked") or tol <= 0:
        return None
    off = []
    for key, what, want in (("sm_mhz", "SM", targets.get("graphics_mhz")),
                            ("mem_mhz", "memory", targets.get("memory_mhz"))):
        if not isinstance(want, (int, float)):
            continue
        for i, side in enumerate(g["sides"]):
            h = _hist(side, key)
            if h and abs(_median(h) - want) > tol:
                off.append(f"{what} clock {_median(h):g} MHz over the {SIDES[i]} samples")
    return (f"the locked clocks moved: {'; '.join(off)} (locked at {targets.get('graphics_mhz')}/"
            f"{targets.get('memory_mhz')} MHz, tolerance {tol:g} MHz; per-sample readings)") if off else None


def _paired_drift(g: dict, fp: dict, cfg: CriticConfig) -> str | None:
    return (_throttle_sides_differ(g, cfg.throttle_share_tolerance)
            or (_clocks_differ(g, cfg.clock_tolerance_mhz) if cfg.clock_tolerance_mhz > 0 else None)
            or _off_lock(g, fp, cfg.clock_tolerance_mhz))


def gate_env(ev: Evidence, st, cfg: CriticConfig) -> GateOutcome | None:  # type: ignore[no-untyped-def]
    if not cfg.check_env or ev.status != "ok" or not ev.fingerprint:
        return None
    fp, base = ev.fingerprint, ev.baseline_fingerprint
    if base and not ev.is_root:
        changed = [f"{k}: {base.get(k)!r} -> {fp.get(k)!r}" for k in IDENTITY_KEYS
                   if k in base and k in fp and base.get(k) != fp.get(k)]
        if changed:
            return GateOutcome("reject", "env_drift", "measured in a different environment than the "
                               f"baseline ({'; '.join(changed[:3])}): timings do not transfer "
                               "across machines; rerun where the baseline ran or start a new campaign")
    paired = paired_readings(ev.facts)
    if paired is not None:  # throttling both sides saw alike (a power cap on a GEMM) is not drift
        why = _paired_drift(paired, fp, cfg)
        if why:
            return remeasure_or_reject(ev, cfg, "env_drift", why)
    else:
        throttled = _throttles(fp)
        if throttled:
            return remeasure_or_reject(ev, cfg, "env_drift", f"the GPU was throttled: {', '.join(throttled[:3])} "
                                       f"— {_why_not_paired(ev.facts)}")
    drift = _clock_drift(fp, base, cfg.clock_tolerance_mhz) if base and not ev.is_root else None
    if drift:
        return remeasure_or_reject(ev, cfg, "env_drift", drift)
    return None


def reference_drift(reference_s: float, baseline_reference_s: float | None, tolerance: float) -> str | None:
    """Why a measurement's own reference timing cannot be trusted, or None. The speedup is paired
    (reference and candidate interleaved in one process), so a reference slowed by something in
    that process (the candidate's side effects: leftover threads, allocator or library state) or on
    the machine inflates it. Seen on the quickstart: after ``torch.compile`` candidates the reference
    ran at 27 ms instead of the baseline's 14 ms, and the speedup read 5.2x instead of 2.7x.

    Two-sided: a reference running much *faster* than the baseline's means this measurement did not
    time the workload the baseline timed (another cache or memory state, another problem size), and
    its ratio is not the campaign's either. Seen on the development set (LeakyReLU + clamp, one
    thread): some measurements ran the reference at 19 ms instead of 36 ms and the compiled
    candidate at 2.5 ms instead of 18 ms; their ratio, 7.3x, became the verified median of a 2.1x
    kernel. A machine that merely got quieter after the baseline is told apart by the reference
    re-probe (a fresh baseline measurement), exactly as one that got busier."""
    if not baseline_reference_s or tolerance <= 0:
        return None
    change = f"({reference_s / baseline_reference_s - 1:+.0%}, tolerance {tolerance:.0%})"
    here = f"the reference ran at {reference_s * 1e3:.3f} ms here but {baseline_reference_s * 1e3:.3f} ms in the " \
           f"baseline's measurement {change}"
    if reference_s > baseline_reference_s * (1 + tolerance):
        return f"{here}: something slowed it, and the speedup would be inflated"
    if reference_s * (1 + tolerance) < baseline_reference_s:
        return f"{here}: this measurement did not time what the baseline timed, and its ratio is not comparable"
    return None


def drift_tolerance(noise_floor: float, cfg: CriticConfig) -> float:
    """From the noise the campaign measured (its baseline's A/A), not a flat 50%: where paired
    ratios pin 1%, a reference 40% slower is not noise. Capped by ``cfg.reference_drift`` (0: off)."""
    if cfg.reference_drift <= 0:
        return 0.0
    return min(cfg.reference_drift, max(cfg.reference_drift_min, cfg.reference_drift_per_noise * noise_floor))


def slowed_in_process(ev: Evidence, st, cfg: CriticConfig) -> GateOutcome | None:  # type: ignore[no-untyped-def]
    """``hack_suspected`` when the reference ran slower in this measurement than when it was just
    measured *alone* (``ev.reference_probe_s``: a fresh baseline measurement in a sandbox with no
    candidate code, taken since this node's previous attempt), *twice*. A machine that slowed down
    slows that probe too; a reference slower only beside the candidate was slowed by something the
    candidate left in its process (a hook, a thread, library or allocator state), and its paired
    speedup is inflated by exactly that factor. Seen: a process-wide forward hook that taxed only
    the reference was rejected as ``unstable`` or ``env_drift``, which blamed the machine.

    Why twice: the probe and the measurement are two sandboxes at two moments (or side by side on
    two workers), so one comparison carries the load's change between them. Seen on a loaded
    2-core CI machine: an honest twin's reference read x1.26 beside it against a 20% tolerance,
    once in a red-team run of ~30 variants, and was named a hack. A candidate's tax is a property
    of its process and repeats; the first sighting orders one more probe and measurement (outside
    the ``unstable``/``env_drift`` budget: it is not the machine's turn).

    Seen twice, the two readings still cannot be told apart for certain: on the same CI box a
    compiled honest twin read x1.34, then x1.20 (tolerance 16%), its first look taken beside the
    other red-team worker's batch. But both readings agree on what the speedup is worth *without*
    the slowdown: the paired ratio divided by the factor, i.e. the reference as it runs alone
    against the candidate. If that still clears the Critic's bar, the result is real whatever
    slowed the reference, and it is judged at that lower figure (``deflate``: the Critic rescales
    the reference's samples and runs the remaining gates); a tax then gains the candidate
    nothing. Only a speedup that exists *because* of the slowdown is named a hack."""
    probe, tol = ev.reference_probe_s, drift_tolerance(ev.noise_floor, cfg)
    if ev.is_root or st is None or not probe or tol <= 0 or st.baseline_median_s <= probe * (1 + tol):
        return None
    factor = st.baseline_median_s / probe
    seen = f"(x{factor:.2f}): it ran at {st.baseline_median_s * 1e3:.3f} ms beside the candidate but " \
           f"{probe * 1e3:.3f} ms when measured alone just before (tolerance {tol:.0%})"
    if not ev.earlier_taxes:
        return GateOutcome("remeasure", "hack_suspected", f"reference slower inside the candidate's process "
                           f"{seen}; measuring the baseline alone, then this candidate again, to see whether "
                           "the slowdown repeats (a load change between the two measurements does not)",
                           purpose="remeasure", reprobe=True, tax=round(factor, 4))
    before = ", ".join(f"x{f:.2f}" for f in ev.earlier_taxes)
    bar = 1.0 + noise_margin(ev, st)  # gate_significant's bar, on the deflated ratio
    kept, kept_low = st.speedup / factor, st.ci_low / factor
    if kept_low > bar and kept >= cfg.min_speedup:
        return GateOutcome("deflate", "reference_tax", f"reference slower beside the candidate {seen}; seen "
                           f"before too ({before}): judged against the reference as it runs alone, "
                           f"{st.speedup:.3f}x / {factor:.2f} = {kept:.3f}x", tax=round(factor, 4))
    return GateOutcome("reject", "hack_suspected", f"reference slowed inside the candidate's process {seen}; "
                       f"seen before too ({before}): something the candidate left in its process slows the "
                       f"reference, and the speedup exists only through it ({st.speedup:.3f}x beside it, "
                       f"{kept:.3f}x [{kept_low:.3f}, {st.ci_high / factor:.3f}] against the reference alone, "
                       f"which does not clear {max(bar, cfg.min_speedup):.3f}x)")


def slow_reference(ev: Evidence, st, cfg: CriticConfig) -> str | None:  # type: ignore[no-untyped-def]
    """Why the reference looks *slowed* in this measurement (the drift's slow side), or None."""
    if ev.is_root or st is None or not ev.baseline_reference_s:
        return None
    why = reference_drift(st.baseline_median_s, ev.baseline_reference_s, drift_tolerance(ev.noise_floor, cfg))
    return why if why and st.baseline_median_s > ev.baseline_reference_s else None


def gate_reference(ev: Evidence, st, cfg: CriticConfig) -> GateOutcome | None:  # type: ignore[no-untyped-def]
    if ev.is_root or st is None or not cfg.check_env:
        return None
    why = reference_drift(st.baseline_median_s, ev.baseline_reference_s, drift_tolerance(ev.noise_floor, cfg))
    if not why:
        return None
    return slowed_in_process(ev, st, cfg) or remeasure_or_reject(ev, cfg, "env_drift", why, reprobe=True)

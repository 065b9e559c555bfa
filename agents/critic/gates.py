"""The Critic's gates (docs/architecture.md#gates), each a small pure function, applied in a fixed order.

A gate returns ``None`` to pass the measurement on, or a ``GateOutcome`` that ends the
evaluation with a decision, a diagnosis code and a one-sentence reason. Order:

0. ``guard``        static AST guard, run before execution (``HeuristicCritic.static_check``)
1. ``ran``          the harness finished (compile_error, runtime_error, timeout, oom, harness_error)
2. ``correct``      correct on every seed, re-run and re-check (``incorrect``)
3. ``plausible``    no integrity violation, not faster than light (``hack_suspected``)
4. ``stable``       robust CV of the paired ratios under the threshold, else re-measure, then ``unstable``
5. ``env``          same environment as the baseline, no throttling (``env_drift``)
6. ``reference``    the reference not slowed vs the baseline's measurement (``env_drift``), nor only
                   beside the candidate (``hack_suspected`` once it repeats; a speedup that clears
                   the bar without the slowdown is judged at that lower figure instead)
7. ``significant``  CI above 1.0 + noise, Mann-Whitney agrees, effect size (``no_gain``, ``regression``);
                   an undecided one (interval across the bar, point above) is measured again and judged
                   by a sequential test over all its looks (``extend``, sequential.py)
8. ``confirm_best`` a new best is measured again, independently, before others build on it

``plausible`` runs before ``stable`` and ``env`` on purpose: an integrity
violation or an impossible speed is a fact about the candidate, not about noise or throttling
(neither makes code look *faster* than light), so re-measuring it wastes a run and ``unstable``
would be the wrong diagnosis (``hack_suspected`` zeroes the move's prior; ``unstable`` does not).
Each gate owns the error classes of its domain: ``ran`` leaves ``incorrect`` to ``correct`` and
``hack_suspected`` to ``plausible``, so the gate log always names the gate that caught a result.
"""

from __future__ import annotations

import math

from .env_gate import gate_env, gate_reference, slow_reference, slowed_in_process
from .evidence import CriticConfig, Evidence, GateLog, GateOutcome, noise_margin, remeasure_or_reject
from . import sequential
from .plausibility import gate_plausible
from .stats import SampleStats

__all__ = ["CriticConfig", "Evidence", "GateLog", "GateOutcome", "GATES", "FAILURE_CLASSES",
           "gate_ran", "gate_correct", "gate_stable", "gate_env", "gate_plausible",
           "gate_significant", "gate_confirm_best", "safe_log"]

FAILURE_CLASSES = {"compile_error", "runtime_error", "timeout", "oom", "harness_error"}
MIN_SEEDS = 3


def _last_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[-1][:300] if lines else "no output"


def gate_ran(ev: Evidence, st: SampleStats | None, cfg: CriticConfig) -> GateOutcome | None:
    if ev.status == "ok" or ev.error_class in ("incorrect", "hack_suspected"):
        return None
    cls = ev.error_class if ev.error_class in FAILURE_CLASSES else "runtime_error"
    text = (ev.error_text or "").strip()
    if cls == "harness_error" and text.startswith("degenerate problem"):
        return GateOutcome("fail", cls, text.splitlines()[0][:400])
    return GateOutcome("fail", cls, f"{cls.replace('_', ' ')}: {_last_line(text)}")


def gate_correct(ev: Evidence, st: SampleStats | None, cfg: CriticConfig) -> GateOutcome | None:
    if ev.error_class == "incorrect":
        return GateOutcome("reject", "incorrect", f"output differs from the reference: "
                           f"{_last_line(ev.error_text)}")
    if ev.status != "ok":
        return None
    bad = [c for c in ev.correctness if not c.get("ok")]
    seeds = {c.get("seed") for c in ev.correctness}
    if len(seeds) < MIN_SEEDS:
        return GateOutcome("reject", "incorrect", f"checked on {len(seeds)} seeds, need at least {MIN_SEEDS}")
    if bad:
        return GateOutcome("reject", "incorrect", f"wrong on seed {bad[0].get('seed')}: {bad[0].get('reason')}")
    return None


def gate_stable(ev: Evidence, st: SampleStats | None, cfg: CriticConfig) -> GateOutcome | None:
    """Stability of what is decided: the paired per-round ratios (for the baseline, its A/A
    ratios), not the absolute times. Load on a shared machine slows whole rounds and inflates
    the absolute CV while the ratios stay tight; preempted single samples scatter the ratios but
    not the medians the speedup is made of. Only a speedup that cannot be pinned (scattered ratios
    *and* a wide CI) is unstable."""
    if st is None:
        return None
    half = (st.ci_high - st.ci_low) / (2 * st.speedup) if st.speedup > 0 else float("inf")
    # a ratio of two samples with independent noise scatters sqrt(2) times as much as either
    # side: max_cv keeps meaning "per side", and load common to a round no longer counts at all
    limit = math.sqrt(2.0) * cfg.max_cv
    if st.ratio_cv <= limit or half <= cfg.max_ci_halfwidth:
        return None
    what = "A/A ratio" if ev.is_root else "paired-ratio"
    reason = (f"{what} robust CV {st.ratio_cv:.1%} exceeds {limit:.0%} (sqrt 2 x max_cv) and the speedup's "
              f"CI is ±{half:.1%} (needs ±{cfg.max_ci_halfwidth:.0%}; absolute times: {st.baseline_cv:.0%} / "
              f"{st.candidate_cv:.0%}) over {st.rounds} rounds")
    # Before blaming the machine: a reference slower here than in the baseline's measurement may
    # be slowed by the candidate itself (a tax that varies scatters the ratios). The fresh
    # baseline probe taken before a re-measurement tells the two apart.
    slow = slow_reference(ev, st, cfg) if cfg.check_env else None
    if slow:
        taxed = slowed_in_process(ev, st, cfg)
        if taxed is not None and taxed.decision != "deflate":  # scattered ratios: nothing to rescale
            return taxed
        return remeasure_or_reject(ev, cfg, "unstable", f"{reason}; {slow}", reprobe=True)
    return remeasure_or_reject(ev, cfg, "unstable", reason)


def gate_significant(ev: Evidence, st: SampleStats | None, cfg: CriticConfig) -> GateOutcome | None:
    """The speedup's CI must clear 1.0 by the noise floor (the campaign baseline's A/A and this
    run's own A/A, whichever is larger), the point estimate must reach the minimum effect size,
    and Mann-Whitney U must agree that the candidate's samples are faster."""
    if ev.is_root or st is None:
        return None
    ci = f"{st.speedup:.3f}x [{st.ci_low:.3f}, {st.ci_high:.3f}]"
    noise = noise_margin(ev, st)
    # parent and child come from different runs, so allow the noise margin before calling it slower
    if st.ci_high * (1.0 + max(noise, cfg.min_speedup - 1.0)) < ev.parent_speedup:
        return GateOutcome("reject", "regression",
                           f"slower than its parent: {ci} vs parent {ev.parent_speedup:.3f}x")
    if ev.earlier_looks or ev.purpose == "extend":  # a look of the sequential test: all looks together
        return sequential_look(ev, st, cfg, noise)
    if st.ci_low <= 1.0 + noise:
        if sequential.undecided(st.speedup, st.ci_low, 1.0 + noise, cfg.min_speedup) and _looks_left(ev, cfg, 0):
            return GateOutcome("remeasure", "extend", f"speedup {ci} is undecided: its point clears the bar "
                               f"{1.0 + noise:.3f}x, its CI does not; measuring it again (look 2 of at most "
                               f"{1 + _looks_cap(ev, cfg)}, pooled)", purpose="extend")
        return GateOutcome("reject", "no_gain", f"speedup {ci} does not clear the noise floor: the "
                           f"CI must lie above {1.0 + noise:.3f}x")
    if st.speedup < cfg.min_speedup:
        return GateOutcome("reject", "no_gain", f"speedup {ci} is below the minimum effect size "
                           f"{cfg.min_speedup:.3f}x")
    if st.mw_p >= cfg.mw_alpha:
        return GateOutcome("reject", "no_gain", f"speedup {ci} but Mann-Whitney U disagrees "
                           f"(p={st.mw_p:.2g} >= {cfg.mw_alpha:g})")
    return None


def _looks_cap(ev: Evidence, cfg: CriticConfig) -> int:
    """Extra looks allowed: the Critic's cap, and no more than the wall budget pays for."""
    cap = cfg.max_extra_looks
    return cap if ev.extra_looks_allowed is None else min(cap, max(0, ev.extra_looks_allowed))


def _looks_left(ev: Evidence, cfg: CriticConfig, done: int) -> bool:
    return done < _looks_cap(ev, cfg)


def sequential_look(ev: Evidence, st: SampleStats, cfg: CriticConfig, noise: float) -> GateOutcome | None:
    """Extra look ``len(ev.earlier_looks)`` of an undecided candidate: accept (pass on to the next
    gate), reject, or one more look while the cap and the budget allow (sequential.py)."""
    looks = [lk for lk in (sequential.look_of(x["speedup"], x["ci_low"], x["ci_high"], cfg.confidence)
                           for x in [*ev.earlier_looks, st.to_dict()]) if lk is not None]
    done = len(ev.earlier_looks)
    z = sequential.z_per_look(cfg.sequential_alpha, max(1, cfg.max_extra_looks))
    bar = 1.0 + noise
    verdict, p = sequential.decide(looks, bar, cfg.min_speedup, z, last=not _looks_left(ev, cfg, done))
    lo, mid, hi = (math.exp(p.log_speedup + k * z * p.se) for k in (-1, 0, 1))
    what = (f"{len(looks)} looks pooled: {mid:.3f}x [{lo:.3f}, {hi:.3f}] at z={z:.2f} against the bar "
            f"{bar:.3f}x (stated false-accept bound "
            f"{sequential.error_bound(cfg.confidence, cfg.sequential_alpha):.2%})")
    if verdict == "accept":
        return None
    if verdict == "continue":
        return GateOutcome("remeasure", "extend", f"still undecided, {what}; measuring it again",
                           purpose="extend")
    why = "cap reached" if mid >= bar and hi >= bar else "cannot reach the bar"
    return GateOutcome("reject", "no_gain", f"{what}: {why}")


def gate_confirm_best(ev: Evidence, st: SampleStats | None, cfg: CriticConfig) -> GateOutcome | None:
    """A new best is measured again before others build on it. When the confirmation contradicts
    the first measurement (one says it beats the best, the other that it does not), a third breaks
    the tie and the median of the three is kept: two runs cannot tell a fluke from a slow run."""
    if ev.is_root or st is None or not cfg.confirm_new_best or ev.confirmed:
        return None
    if ev.earlier_looks:  # the sequential test pooled independent measurements: confirmed already
        return None
    if ev.purpose == "confirm":
        first = ev.previous_speedup
        if first is not None and first > ev.best_speedup >= st.speedup:
            return GateOutcome("remeasure", "tiebreak",
                               f"the confirmation ({st.speedup:.3f}x) contradicts the first measurement "
                               f"({first:.3f}x) about beating the best ({ev.best_speedup:.3f}x): a third "
                               "measurement breaks the tie", purpose="tiebreak")
        return None
    if st.speedup > ev.best_speedup and ev.purpose != "tiebreak":
        return GateOutcome("remeasure", "confirm",
                           f"new best {st.speedup:.3f}x (was {ev.best_speedup:.3f}x): confirming with an "
                           "independent measurement", purpose="confirm")
    return None


GATES = (
    ("ran", gate_ran),
    ("correct", gate_correct),
    ("plausible", gate_plausible),
    ("stable", gate_stable),
    ("env", gate_env),
    ("reference", gate_reference),
    ("significant", gate_significant),
    ("confirm_best", gate_confirm_best),
)


def safe_log(x: float) -> float:
    return math.log(x) if x > 0 else float("-inf")

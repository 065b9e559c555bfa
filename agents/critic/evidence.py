"""What the Critic's gates read (``Evidence``), how they are tuned (``CriticConfig``) and what they
return (``GateOutcome``). Kept apart from the gates so every gate module can import them without
import cycles; ``gates.py`` re-exports all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CriticConfig:
    """Every threshold the gates use; the campaign's ``critic:`` section sets them."""

    max_cv: float = 0.15  # robust CV of the paired ratios above which a measurement is re-taken, then `unstable`
    # ... unless the speedup's CI is this narrow anyway (relative half-width): on a loaded box a
    # minority of preempted samples scatters the ratios but barely moves either median
    max_ci_halfwidth: float = 0.05
    confidence: float = 0.95  # of the bootstrap interval of the speedup
    resamples: int = 2000  # bootstrap resamples (>= 1000)
    min_speedup: float = 1.01  # minimum effect size
    mw_alpha: float = 0.05  # Mann-Whitney U second opinion: p must be below this
    max_remeasures: int = 1  # re-measurements allowed for `unstable` / transient `env_drift`
    confirm_new_best: bool = True
    plausibility_slack: float = 2.0  # flag only results this many times faster than light
    plausibility_flops: bool = False  # also bound by the reference's FLOPs (fixed-algorithm problems)
    min_timed_coverage: float = 0.5  # CPU: share of the timing phase inside the timer
    clock_tolerance_mhz: float = 50.0  # GPU clocks vs the baseline's (0: do not compare)
    check_env: bool = True
    # How much slower than in the baseline's measurement the reference may run: the baseline's
    # A/A noise floor times ``reference_drift_per_noise``, at least ``reference_drift_min`` and
    # at most ``reference_drift`` (0: off). A 1% floor allows 15%, a 3% one 30%.
    reference_drift: float = 0.5
    reference_drift_per_noise: float = 10.0
    reference_drift_min: float = 0.15
    seed: int = 0


@dataclass
class Evidence:
    """Everything a gate may look at. Built by the loop from the store, never by an agent."""

    is_root: bool
    attempt: int
    purpose: str  # primary | remeasure | confirm | tiebreak
    status: str
    error_class: str | None
    error_text: str | None
    correctness: list
    parent_speedup: float = 1.0
    best_speedup: float = 1.0
    noise_floor: float = 0.0
    remeasures_done: int = 0  # re-measurements already ordered for `unstable` or `env_drift`
    confirmed: bool = False  # an earlier attempt of this node already passed every gate
    previous_speedup: float | None = None  # speedup of the attempt being confirmed
    earlier_speedups: list = field(default_factory=list)  # tie-break: the first measurement's, the confirmation's
    baseline_reference_s: float | None = None  # the reference's median in the campaign baseline's measurement
    fingerprint: dict = field(default_factory=dict)  # this measurement's environment
    baseline_fingerprint: dict | None = None  # the campaign baseline's (root node) environment
    facts: dict = field(default_factory=dict)  # harness facts: cost, peak, inner, timers, audit


@dataclass(frozen=True)
class GateOutcome:
    decision: str  # accept | reject | remeasure | fail
    diagnosis: str
    reason: str
    purpose: str | None = None  # for remeasure: remeasure | confirm | tiebreak


@dataclass
class GateLog:
    entries: list[dict] = field(default_factory=list)

    def add(self, name: str, passed: bool, reason: str) -> None:
        self.entries.append({"gate": name, "passed": passed, "reason": reason})


def remeasure_or_reject(ev: Evidence, cfg: CriticConfig, diagnosis: str, reason: str) -> GateOutcome:
    """Transient trouble (noise, throttling) earns a re-measurement, once; then a rejection."""
    if ev.remeasures_done < cfg.max_remeasures:
        return GateOutcome("remeasure", diagnosis, reason + "; measuring again", purpose="remeasure")
    return GateOutcome("reject", diagnosis, reason + f" after {ev.remeasures_done} re-measurement(s)")

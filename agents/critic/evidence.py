"""What the Critic's gates read (``Evidence``), how they are tuned (``CriticConfig``) and what they
return (``GateOutcome``). Kept apart from the gates so every gate module can import them without
import cycles; ``gates.py`` re-exports all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field


class CriticThresholds(BaseModel):
    """Every threshold the gates use, with its default and bounds: the one place they are defined.
    A campaign's ``critic:`` section is this model plus the harness's settings, so a new threshold
    is a field here and nothing else."""

    model_config = ConfigDict(extra="forbid")

    max_cv: float = Field(default=0.15, gt=0, description="robust CV of the paired per-round ratios above "
                          "which a measurement is re-taken, then `unstable`")
    max_ci_halfwidth: float = Field(default=0.05, ge=0, description="... unless the speedup's CI is this narrow "
                                    "anyway (relative half-width): on a loaded host a minority of preempted "
                                    "samples scatters the ratios but barely moves either median")
    confidence: float = Field(default=0.95, gt=0.5, lt=1, description="of the bootstrap interval of the speedup")
    bootstrap_resamples: int = Field(default=2000, ge=1000)
    min_speedup: float = Field(default=1.01, ge=1.0, description="minimum effect size")
    mw_alpha: float = Field(default=0.05, gt=0, le=0.5, description="Mann-Whitney U must give p below this")
    max_remeasures: int = Field(default=1, ge=0, le=5, description="re-measurements allowed for `unstable` / "
                                "transient `env_drift`")
    confirm_new_best: bool = Field(default=True, description="re-measure a new best before building on it")
    max_extra_looks: int = Field(default=2, ge=0, le=6, description="undecided candidates (interval across the "
                                 "bar, point above it): further measurements, judged pooled by a sequential "
                                 "test (agents/critic/sequential.py; 0: reject them at once)")
    sequential_alpha: float = Field(default=0.0125, gt=0, le=0.05, description="one-sided error the extra looks "
                                    "spend, equally (Bonferroni); the stated false-accept bound is this plus the "
                                    "first look's (1 - confidence) / 2")
    plausibility_slack: float = Field(default=2.0, ge=1.0,
                                      description="hack_suspected only when faster than speed of light / slack")
    plausibility_flops: bool = Field(default=False, description="also floor by the reference's FLOPs "
                                     "(only for problems whose algorithm cannot change)")
    min_timed_coverage: float = Field(default=0.5, ge=0, le=1,
                                      description="CPU: share of the timing phase inside the timer")
    clock_tolerance_mhz: float = Field(default=50.0, ge=0, description="locked GPU clocks vs the baseline's "
                                       "(0: do not compare)")
    throttle_share_tolerance: float = Field(default=0.1, ge=0, le=1, description="GPU: how much the shares of "
                                            "throttled samples may differ between the reference's and the "
                                            "candidate's side (and only beyond 99% significance) before env_drift")
    check_env: bool = Field(default=True, description="env_drift gate on/off")
    # How much slower than in the baseline's measurement the reference may run: the baseline's A/A
    # noise floor times ``reference_drift_per_noise``, at least ``reference_drift_min`` and at most
    # ``reference_drift`` (0: off). A 1% floor allows 15%, a 3% one 30%.
    reference_drift: float = Field(default=0.5, ge=0, description="env_drift cap: the reference may run at most "
                                   "this much slower than in the baseline's measurement (0: off)")
    reference_drift_per_noise: float = Field(default=10.0, ge=0, description="allowed reference drift per unit "
                                             "of the baseline's A/A noise floor")
    reference_drift_min: float = Field(default=0.15, ge=0, description="allowed reference drift, lower bound")


class CriticConfig(CriticThresholds):
    """The thresholds plus the seed of the bootstrap: what a Critic is built with."""

    model_config = ConfigDict(extra="forbid", frozen=True)

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
    # sequential test (agents/critic/sequential.py): the stats of this node's earlier looks, each of
    # which the Critic found undecided (diagnosis ``extend``), and how many more looks the campaign's
    # remaining wall budget pays for (None: no budget to respect)
    earlier_looks: list = field(default_factory=list)
    extra_looks_allowed: int | None = None
    baseline_reference_s: float | None = None  # the reference's median in the campaign baseline's measurement
    # the reference measured alone (a fresh baseline measurement, no candidate code in its process)
    # since this node's previous attempt: ``steps.reprobe_reference``; None when there was none
    reference_probe_s: float | None = None
    # in-process slowdowns (reference beside the candidate / alone) seen at this node's earlier
    # attempts, each of which ordered one more measurement to see whether it repeats
    earlier_taxes: list = field(default_factory=list)
    fingerprint: dict = field(default_factory=dict)  # this measurement's environment
    baseline_fingerprint: dict | None = None  # the campaign baseline's (root node) environment
    facts: dict = field(default_factory=dict)  # harness facts: cost, peak, inner, timers, audit


@dataclass(frozen=True)
class GateOutcome:
    # accept | reject | remeasure | fail; ``deflate`` (the reference gate only): judge the rest on
    # the reference's samples divided by ``tax`` (its slowdown beside the candidate, seen twice)
    decision: str
    diagnosis: str
    reason: str
    purpose: str | None = None  # for remeasure: remeasure | confirm | tiebreak
    # measure the reference alone (a fresh baseline measurement) before the re-measurement: the
    # next verdict can then tell a machine that slowed from a candidate that slowed its process
    reprobe: bool = False
    tax: float | None = None  # the in-process slowdown this verdict asks to see again (gate log ``tax``)


@dataclass
class GateLog:
    entries: list[dict] = field(default_factory=list)

    def add(self, name: str, passed: bool, reason: str) -> None:
        self.entries.append({"gate": name, "passed": passed, "reason": reason})


def noise_margin(ev: Evidence, st) -> float:  # type: ignore[no-untyped-def]
    """How far above 1.0 a speedup's CI must lie: the campaign baseline's A/A noise floor or this
    run's own A/A, whichever is larger."""
    return max(ev.noise_floor, st.aa_noise)


def remeasure_or_reject(ev: Evidence, cfg: CriticConfig, diagnosis: str, reason: str,
                        reprobe: bool = False) -> GateOutcome:
    """Transient trouble (noise, throttling) earns a re-measurement, once; then a rejection.
    ``reprobe``: the reference ran slow, so the baseline is measured alone first."""
    if ev.remeasures_done < cfg.max_remeasures:
        again = "; measuring the baseline alone, then this candidate again" if reprobe else "; measuring again"
        return GateOutcome("remeasure", diagnosis, reason + again, purpose="remeasure", reprobe=reprobe)
    return GateOutcome("reject", diagnosis, reason + f" after {ev.remeasures_done} re-measurement(s)")

"""The Critic's gates, each a small pure function, applied in a fixed order.

A gate returns ``None`` to pass the measurement on, or a ``GateOutcome`` that ends the
evaluation with a decision and a diagnosis code. Keeping them separate makes each testable
on synthetic samples and lets the integrity work add gates without touching the others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .stats import SampleStats


@dataclass(frozen=True)
class CriticConfig:
    max_cv: float = 0.15
    confidence: float = 0.95
    resamples: int = 2000
    min_speedup: float = 1.01
    max_remeasures: int = 1
    confirm_new_best: bool = True
    seed: int = 0


@dataclass
class Evidence:
    """Everything a gate may look at. Built by the loop from the store, never by an agent."""

    is_root: bool
    attempt: int
    purpose: str  # primary | remeasure | confirm
    status: str
    error_class: str | None
    error_text: str | None
    correctness: list
    parent_speedup: float = 1.0
    best_speedup: float = 1.0
    noise_floor: float = 0.0
    remeasures_done: int = 0
    confirmed: bool = False  # an earlier attempt of this node already passed every gate
    previous_speedup: float | None = None  # speedup of the attempt being confirmed


@dataclass(frozen=True)
class GateOutcome:
    decision: str  # accept | reject | remeasure | fail
    diagnosis: str
    reason: str
    purpose: str | None = None  # for remeasure: remeasure | confirm


@dataclass
class GateLog:
    entries: list[dict] = field(default_factory=list)

    def add(self, name: str, passed: bool, reason: str) -> None:
        self.entries.append({"gate": name, "passed": passed, "reason": reason})


FAILURE_CLASSES = {"compile_error", "runtime_error", "timeout", "oom", "harness_error"}


def gate_ran(ev: Evidence, st: SampleStats | None, cfg: CriticConfig) -> GateOutcome | None:
    if ev.status == "ok":
        return None
    cls = ev.error_class or "runtime_error"
    text = (ev.error_text or "").strip().splitlines()
    detail = text[-1][:300] if text else "no output"
    if cls == "incorrect":
        return GateOutcome("reject", "incorrect", f"output differs from the reference: {detail}")
    if cls == "hack_suspected":
        return GateOutcome("reject", "hack_suspected", detail)
    if cls not in FAILURE_CLASSES:
        cls = "runtime_error"
    return GateOutcome("fail", cls, f"{cls.replace('_', ' ')}: {detail}")


def gate_correct(ev: Evidence, st: SampleStats | None, cfg: CriticConfig) -> GateOutcome | None:
    bad = [c for c in ev.correctness if not c.get("ok")]
    if len(ev.correctness) < 3:
        return GateOutcome("reject", "incorrect", f"checked on {len(ev.correctness)} seeds, need at least 3")
    if bad:
        return GateOutcome("reject", "incorrect", f"wrong on seed {bad[0].get('seed')}")
    return None


def gate_stable(ev: Evidence, st: SampleStats | None, cfg: CriticConfig) -> GateOutcome | None:
    worst = max(st.baseline_cv, st.candidate_cv)
    if worst <= cfg.max_cv:
        return None
    reason = f"robust CV {worst:.1%} exceeds {cfg.max_cv:.0%}"
    if ev.remeasures_done < cfg.max_remeasures:
        return GateOutcome("remeasure", "unstable", reason + "; measuring again", purpose="remeasure")
    return GateOutcome("reject", "unstable", reason + f" after {ev.remeasures_done} re-measurement(s)")


def gate_significant(ev: Evidence, st: SampleStats | None, cfg: CriticConfig) -> GateOutcome | None:
    if ev.is_root:
        return None
    ci = f"{st.speedup:.3f}x [{st.ci_low:.3f}, {st.ci_high:.3f}]"
    margin = max(cfg.min_speedup - 1.0, ev.noise_floor)
    # parent and child come from different runs, so allow the noise margin before calling it slower
    if st.ci_high * (1.0 + margin) < ev.parent_speedup:
        return GateOutcome("reject", "regression",
                           f"slower than its parent: {ci} vs parent {ev.parent_speedup:.3f}x")
    floor = 1.0 + margin
    if st.ci_low <= 1.0 or st.speedup < floor:
        return GateOutcome("reject", "no_gain",
                           f"speedup {ci} is not significant (needs CI above 1.0 and >= {floor:.3f}x)")
    return None


def gate_confirm_best(ev: Evidence, st: SampleStats | None, cfg: CriticConfig) -> GateOutcome | None:
    if ev.is_root or not cfg.confirm_new_best or ev.confirmed:
        return None
    if st.speedup > ev.best_speedup and ev.purpose != "confirm":
        return GateOutcome("remeasure", "confirm",
                           f"new best {st.speedup:.3f}x (was {ev.best_speedup:.3f}x): confirming with an "
                           "independent measurement", purpose="confirm")
    return None


GATES = (
    ("ran", gate_ran),
    ("correct", gate_correct),
    ("stable", gate_stable),
    ("significant", gate_significant),
    ("confirm_best", gate_confirm_best),
)


def safe_log(x: float) -> float:
    return math.log(x) if x > 0 else float("-inf")

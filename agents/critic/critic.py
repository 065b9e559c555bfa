"""The Critic: the only agent that can accept a result.

It reads evidence assembled from the store, runs the gates in order and returns a judgement.
It never proposes candidates, and nothing it is handed comes from the candidate's process except
raw samples and correctness records, which it re-derives statistics from itself.
"""

from __future__ import annotations

import math
import statistics

from arbor.agents.contracts import Critic, Judgement

from .gates import GATES, CriticConfig, Evidence, GateLog
from .guard import check_source
from .plausibility import plausibility_note
from .sequential import look_of, pooled
from .stats import SampleStats, summarize

_FINAL = {"accept": "accepted", "reject": "rejected", "fail": "failed", "remeasure": None}


class HeuristicCritic(Critic):
    name = "critic"

    def __init__(self, config: CriticConfig):
        self.config = config

    def static_check(self, source: str, allowed_modules: frozenset[str] = frozenset(),
                     precision: str = "fp32") -> Judgement | None:
        """Gate 1 (static guard). ``None`` means the candidate may run."""
        findings = check_source(source, allowed_modules, precision)
        if not findings:
            return None
        first = findings[0]
        reason = "; ".join(f"line {f.line}: {f.reason}" for f in findings[:5])
        decision = "fail" if first.code == "compile_error" else "reject"
        return Judgement(decision, first.code, reason, _FINAL[decision],
                         gates=[{"gate": "guard", "passed": False, "reason": reason}])

    def judge(self, ev: Evidence, baseline_samples: list[float], candidate_samples: list[float]) -> Judgement:
        log = GateLog()
        log.add("guard", True, "static guard passed before execution")
        st: SampleStats | None = None
        if ev.status == "ok" and baseline_samples and candidate_samples:
            st = summarize(baseline_samples, candidate_samples, self.config.bootstrap_resamples,
                           self.config.confidence, self.config.seed)
        elif ev.status == "ok":  # ran but produced no samples: cannot be judged
            log.add("ran", False, "no timing samples")
            return Judgement("fail", "harness_error", "measurement returned no timing samples",
                             "failed", log.entries)
        raw, tax = st, None
        for name, gate in GATES:
            outcome = gate(ev, st, self.config)
            if outcome is None:
                log.add(name, True, plausibility_note(ev, st, self.config) if name == "plausible"
                        else "passed")
                continue
            if outcome.decision == "deflate" and st is not None:
                # the reference ran slower beside the candidate, twice: the remaining gates judge
                # the speedup against the reference as it runs alone (env_gate.slowed_in_process)
                tax = float(outcome.tax or 1.0)
                st = summarize([b / tax for b in baseline_samples], candidate_samples,
                               self.config.bootstrap_resamples, self.config.confidence, self.config.seed)
                log.add(name, True, outcome.reason)
                log.entries[-1]["tax"] = tax
                continue
            log.add(name, False, outcome.reason)
            if outcome.reprobe:  # read by the loop (``steps.measure``): probe the reference first
                log.entries[-1]["reprobe"] = True
            if outcome.tax is not None:  # read back as ``Evidence.earlier_taxes`` at the next attempt
                log.entries[-1]["tax"] = outcome.tax
            return Judgement(outcome.decision, outcome.diagnosis, outcome.reason, _FINAL[outcome.decision],
                             gates=log.entries, stats=_stats(st, tax),
                             remeasure_purpose=outcome.purpose,
                             speedup=st.speedup if st else None)
        assert st is not None
        if ev.is_root:
            noise = max(st.ci_high - 1.0, 1.0 - st.ci_low, st.aa_noise, 0.0)
            reason = (f"baseline {st.baseline_median_s * 1e3:.3f} ms; A/A speedup {st.speedup:.3f}x "
                      f"[{st.ci_low:.3f}, {st.ci_high:.3f}] sets the noise floor at {noise:.1%}")
            return Judgement("accept", "baseline", reason, "accepted", log.entries, st.to_dict(),
                             speedup=1.0, value=0.0, noise_floor=noise)
        if ev.earlier_looks:  # accepted by the sequential test: the pooled estimate of every look
            speedup = pooled_speedup(ev, st, self.config.confidence)
            confirmed = f"; {len(ev.earlier_looks) + 1} looks pooled by the sequential test: {speedup:.3f}x"
        elif ev.purpose == "tiebreak" and ev.earlier_speedups:
            runs = [*ev.earlier_speedups, st.speedup]
            speedup = statistics.median(runs)
            confirmed = f"; tie-break of {', '.join(f'{x:.3f}x' for x in runs)}: the median is kept"
        else:
            speedup = st.speedup if ev.previous_speedup is None else min(st.speedup, ev.previous_speedup)
            confirmed = ("" if ev.previous_speedup is None
                         else f"; confirmed ({ev.previous_speedup:.3f}x before), kept the lower")
        alone = "" if tax is None else (f" as it runs alone ({raw.speedup:.3f}x beside the candidate, where "
                                        f"it ran x{tax:.2f} slower at two looks)")
        reason = (f"{st.speedup:.3f}x faster than the reference{alone} [{st.ci_low:.3f}, {st.ci_high:.3f}] "
                  f"at {self.config.confidence:.0%}, Mann-Whitney p={st.mw_p:.2g}{confirmed}")
        return Judgement("accept", "improved", reason, "accepted", log.entries, _stats(st, tax),
                         speedup=speedup, value=math.log(speedup))


def pooled_speedup(ev: Evidence, st: SampleStats, confidence: float) -> float:
    """The inverse-variance pooled speedup of a node's looks (sequential.py), this one included."""
    looks = [lk for lk in (look_of(x["speedup"], x["ci_low"], x["ci_high"], confidence)
                           for x in [*ev.earlier_looks, st.to_dict()]) if lk is not None]
    return math.exp(pooled(looks).log_speedup) if looks else st.speedup


def _stats(st: SampleStats | None, tax: float | None) -> dict:
    """The statistics a verdict keeps; ``reference_tax``: the factor its reference samples were
    divided by (the raw samples stay in the measurement)."""
    out = st.to_dict() if st else {}
    if tax is not None:
        out["reference_tax"] = tax
    return out

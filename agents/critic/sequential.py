"""Undecided candidates get more samples: a group-sequential test on the pooled log speedup.

A candidate whose speedup's interval straddles the bar (1.0 plus the noise floor) while its point
estimate clears it is neither shown faster nor shown not to be. Issue 41's GEMM+multiply+LeakyReLU
rejected three of ten that way (1.059x [1.014, 1.089] against a 5.2% floor): one measurement
was too short to tell, and a reject there throws away what may be a real 6%. Such a candidate is
measured again, in a fresh process each time, up to ``max_extra_looks`` times (and never more than
the campaign's remaining wall budget pays for, ``Evidence.extra_looks_allowed``), and each look
judges all the measurements so far together.

The rule. Each measurement i gives the log of its speedup, l_i, and a standard error s_i read
from its own bootstrap interval (half its width in logs over z at the Critic's confidence).
Measurements are independent processes, so at look k the inverse-variance pooled estimate
L = sum(l_i / s_i^2) / sum(1 / s_i^2) has standard error S = 1 / sqrt(sum(1 / s_i^2)) — with each
s_i^2 widened by the looks' disagreement beyond their own errors (random effects, ``pooled``). Look k
accepts when L - z S clears log(bar) and exp(L) reaches the minimum effect size; it rejects
(futility) when L + z S stays below log(bar), and at the cap whatever remains undecided. z spends
``sequential_alpha`` equally over the extra looks (Bonferroni: z = Phi^-1(1 - alpha / looks)).

The error rate, stated: for a candidate no faster than the bar, the chance of any accept is at
most the first look's one-sided level ((1 - confidence) / 2 = 2.5% at 95%) plus
``sequential_alpha`` (1.25%): 3.75% in all, by the union bound, whatever the correlation between
looks. The noise floor in the bar makes the A/A rate far lower still: ``benchmarks.aa_false_accept``
measures it, and ``tests/test_sequential.py`` checks the bound on seeded null data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

__all__ = ["Look", "look_of", "pooled", "decide", "z_per_look", "error_bound"]

_MIN_SE = 1e-6  # a degenerate interval (identical samples) must not take all the weight


@dataclass(frozen=True)
class Look:
    log_speedup: float
    se: float


def look_of(speedup: float, ci_low: float, ci_high: float, confidence: float) -> Look | None:
    """One measurement's log speedup and its standard error, from its interval; None if unusable."""
    if not (speedup > 0 and ci_low > 0 and ci_high >= ci_low):
        return None
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)
    return Look(math.log(speedup), max((math.log(ci_high) - math.log(ci_low)) / (2.0 * z), _MIN_SE))


def pooled(looks: list[Look]) -> Look:
    """The inverse-variance weighted mean of independent looks and its standard error, with the
    looks' disagreement beyond their own errors added to each (DerSimonian-Laird random effects).

    Why the random effects: each look's interval covers the noise *inside* its process only. On
    a loaded machine whole processes differ (A/A runs of the 0.6 ms GELU gate at load 12-15 read
    0.11x to 5.2x, and 20% of their intervals excluded 1.0); fixed-effect pooling trusted three
    such looks and accepted 3 A/A candidates of 21 extended, one at 1.074x pooled from looks of
    1.07x, 1.25x [1.08, 1.42] and so on. Looks that disagree more than their errors allow widen
    the pooled error instead (tau^2 from Cochran's Q)."""
    w = [1.0 / (lk.se * lk.se) for lk in looks]
    total = sum(w)
    fixed = sum(wi * lk.log_speedup for wi, lk in zip(w, looks)) / total
    q = sum(wi * (lk.log_speedup - fixed) ** 2 for wi, lk in zip(w, looks))
    spread = total - sum(wi * wi for wi in w) / total
    tau2 = max(0.0, (q - (len(looks) - 1)) / spread) if spread > 0 else 0.0
    w = [1.0 / (lk.se * lk.se + tau2) for lk in looks]
    total = sum(w)
    return Look(sum(wi * lk.log_speedup for wi, lk in zip(w, looks)) / total, 1.0 / math.sqrt(total))


def z_per_look(alpha: float, extra_looks: int) -> float:
    """The one-sided critical value each extra look uses: ``alpha`` spent equally over them."""
    return NormalDist().inv_cdf(1.0 - alpha / max(1, extra_looks))


def error_bound(confidence: float, alpha: float) -> float:
    """The stated false-accept bound of the first look plus the extra ones (union bound)."""
    return (1.0 - confidence) / 2.0 + alpha


def decide(looks: list[Look], bar: float, min_speedup: float, z: float, last: bool) -> tuple[str, Look]:
    """``accept``, ``reject`` or ``continue`` for the looks so far, with the pooled estimate."""
    p = pooled(looks)
    if p.log_speedup - z * p.se > math.log(bar) and math.exp(p.log_speedup) >= min_speedup:
        return "accept", p
    if last or p.log_speedup + z * p.se < math.log(bar):
        return "reject", p
    return "continue", p


def undecided(speedup: float, ci_low: float, bar: float, min_speedup: float) -> bool:
    """The first look could not tell: its point clears the bar (and the effect size), its interval
    does not."""
    return ci_low <= bar <= speedup and speedup >= min_speedup

"""Statistics the Critic decides with. numpy only (no scipy), vectorised so 2000 bootstrap
resamples of 200 rounds cost a few milliseconds.

Baseline and candidate are measured interleaved in rounds, so samples are *paired*: resampling
whole rounds keeps the pairing and lets drift cancel, which is why the bootstrap below resamples
round indices rather than each side independently.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np


def robust_cv(samples: list[float] | np.ndarray) -> float:
    """1.4826·MAD / median: a coefficient of variation a few outliers on a shared box cannot inflate."""
    x = np.asarray(samples, dtype=float)
    if x.size < 2:
        return float("inf")
    med = float(np.median(x))
    if med <= 0:
        return float("inf")
    return float(1.4826 * np.median(np.abs(x - med)) / med)


def ratio_cv(baseline, candidate) -> float:
    """Robust CV of the paired per-round ratios baseline/candidate: what the speedup is decided
    on. Load that slows a whole round slows both of its samples, so it inflates the CV of the
    absolute times but cancels here; only noise that hits one side of a round and not the other
    (what can actually bias the ratio) remains."""
    b, c = np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float)
    n = min(b.size, c.size)
    if n < 2 or np.any(c[:n] <= 0):
        return float("inf")
    return robust_cv(b[:n] / c[:n])


def cv(samples: list[float] | np.ndarray) -> float:
    x = np.asarray(samples, dtype=float)
    if x.size < 2 or x.mean() <= 0:
        return float("inf")
    return float(x.std(ddof=1) / x.mean())


def iqr(samples) -> float:
    q1, q3 = np.percentile(np.asarray(samples, dtype=float), [25, 75])
    return float(q3 - q1)


def bootstrap_speedup_ci(baseline, candidate, resamples: int = 2000, confidence: float = 0.95,
                         seed: int = 0) -> tuple[float, float, float]:
    """Speedup = median(baseline)/median(candidate) with a paired percentile bootstrap CI."""
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    n = min(b.size, c.size)
    b, c = b[:n], c[:n]
    point = float(np.median(b) / np.median(c))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    ratios = np.median(b[idx], axis=1) / np.median(c[idx], axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(ratios, [alpha, 1.0 - alpha])
    return point, float(lo), float(hi)


def mann_whitney_u(a, b) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test (normal approximation with tie correction): (U, p)."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    n1, n2 = x.size, y.size
    if n1 == 0 or n2 == 0:
        return 0.0, 1.0
    allv = np.concatenate([x, y])
    order = allv.argsort(kind="mergesort")
    ranks = np.empty_like(allv)
    sorted_v = allv[order]
    # average ranks for ties
    i = 0
    tie_term = 0.0
    while i < sorted_v.size:
        j = i
        while j + 1 < sorted_v.size and sorted_v[j + 1] == sorted_v[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        t = j - i + 1
        tie_term += t ** 3 - t
        i = j + 1
    r1 = ranks[:n1].sum()
    u1 = r1 - n1 * (n1 + 1) / 2.0
    mu = n1 * n2 / 2.0
    n = n1 + n2
    sigma = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))) if n > 1 else 0.0
    if sigma == 0:
        return float(u1), 1.0
    z = (abs(u1 - mu) - 0.5) / sigma
    p = math.erfc(max(z, 0.0) / math.sqrt(2.0))
    return float(u1), float(min(1.0, p))


def aa_split_noise(baseline, resamples: int = 2000, confidence: float = 0.95, seed: int = 0) -> float:
    """An A/A comparison inside one measurement: baseline rounds split by parity (in ABBA order the
    even rounds ran before the candidate, the odd ones after it) and compared like a speedup. The
    result is the *demonstrated* bias, i.e. how far that ratio's CI stays away from 1.0 (0 when
    the CI contains 1.0): a position-in-round effect this run could mistake for a gain. Plain
    scatter is already in the speedup's own CI, so it must not be counted twice."""
    b = np.asarray(baseline, dtype=float)
    n = b.size // 2
    if n < 3:
        return 0.0
    _, lo, hi = bootstrap_speedup_ci(b[0:2 * n:2], b[1:2 * n:2], resamples, confidence, seed + 1)
    return float(max(lo - 1.0, 1.0 - hi, 0.0))


@dataclass
class SampleStats:
    baseline_median_s: float
    candidate_median_s: float
    baseline_cv: float
    candidate_cv: float
    baseline_iqr_s: float
    candidate_iqr_s: float
    speedup: float
    ci_low: float
    ci_high: float
    mw_p: float
    rounds: int
    aa_noise: float = 0.0
    ratio_cv: float = 0.0  # robust CV of the paired per-round ratios (see ``ratio_cv``)

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(baseline, candidate, resamples: int = 2000, confidence: float = 0.95,
              seed: int = 0) -> SampleStats:
    speedup, lo, hi = bootstrap_speedup_ci(baseline, candidate, resamples, confidence, seed)
    _, p = mann_whitney_u(baseline, candidate)
    return SampleStats(
        baseline_median_s=float(np.median(baseline)),
        candidate_median_s=float(np.median(candidate)),
        baseline_cv=robust_cv(baseline),
        candidate_cv=robust_cv(candidate),
        baseline_iqr_s=iqr(baseline),
        candidate_iqr_s=iqr(candidate),
        speedup=speedup,
        ci_low=lo,
        ci_high=hi,
        mw_p=p,
        rounds=min(len(baseline), len(candidate)),
        aa_noise=aa_split_noise(baseline, resamples, confidence, seed),
        ratio_cv=ratio_cv(baseline, candidate),
    )

"""How a cold and a warm campaign of one problem compare, once their candidates were re-measured
side by side (benchmarks/remeasure.py), and the medians over problems that judge the goals of
benchmarks/warm_start.py. Pure: progress dicts in, rows and numbers out."""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path

from benchmarks.remeasure import EAGER, Remeasured, curve, reach

REACH, NOISE, GOAL_RATIO = 0.95, 0.05, 0.5
# The goal is judged where a warm start can show anything: problems whose cold run needed at least
# MIN_COLD evaluations to its target (a cold run that wins at evaluation 1 can only be tied), and
# only once there are at least MIN_PROBLEMS of them.
MIN_COLD, MIN_PROBLEMS = 3, 8
# Rounds the two finals of a problem are measured side by side when they differ (the curves keep
# ``--rounds``). A judge with 3 rounds calls equal finals "worse" too often to test "never worse":
# resampling the per-round residuals of every candidate of three full runs (2026-11-28, 1,614
# measurements, heavy-tailed), two equal finals read below 1 - NOISE with probability 2.6% at 3
# rounds, 0.8% at 5 and 0.2% at 7, so a run with 23 such problems shows at least one false "worse"
# 46%, 16% and 5% of the time. ``false_worse`` prints that rate from each run's own residuals.
FINAL_ROUNDS = 7


def final_ratio(rm: Remeasured, cold_key: str | None, warm_key: str | None) -> float | None:
    """warm final / cold final on the re-measured medians (a final that kept the reference is 1.0;
    None: a final has no trusted re-measurement)."""
    c = 1.0 if cold_key is None else rm.median(cold_key)
    w = 1.0 if warm_key is None else rm.median(warm_key)
    return w / c if c and w else None


def compare_row(p: Path, scale: float, c: dict, w: dict, r: dict | None, warm_priors: int) -> dict:
    row = {"problem": p.stem, "scale": scale, "cold_final": c["final"], "warm_final": w["final"],
           "cold_s": round(c["seconds"], 1), "warm_s": round(w["seconds"], 1), "error": c["error"] or w["error"],
           "warm_priors": warm_priors}
    if row["error"] or r is None:
        row.update(cold_evals=None, warm_evals=None, ratio=None, worse=None,
                   error=row["error"] or "not re-measured yet (run --phase remeasure)")
        return row
    rm = Remeasured.from_json(r["remeasured"])
    value = {k: rm.median(k) for k in rm.values}  # None: no measurement whose reference held
    cc, wc = curve(r["cold"]["evaluations"], value), curve(r["warm"]["evaluations"], value)
    # 95% of the cold run's best, everything measured again side by side (the same artifact has one
    # value in both runs); below 1/0.95 the baseline itself reaches it and there is no target
    cold_best = cc[-1] if cc else 1.0
    target = REACH * cold_best if REACH * cold_best > 1.0 else None
    row.update(cold_best=round(cold_best, 4), warm_best=round(wc[-1] if wc else 1.0, 4),
               cold_evals=reach(cc, target) if target else None, warm_evals=reach(wc, target) if target else None)
    row["ratio"] = (row["warm_evals"] / row["cold_evals"]) if row["warm_evals"] and row["cold_evals"] else None
    row["same_final"] = r["cold"]["final"] == r["warm"]["final"]  # one artifact: equal by construction
    fr = final_ratio(rm, r["cold"]["final"], r["warm"]["final"])
    row["final_ratio"] = round(fr, 4) if fr is not None else None
    row["worse"] = fr is not None and fr < 1 - NOISE
    eager = rm.kept(EAGER)
    row["eager_spread"] = round(max(abs(x - 1) for x in eager), 4) if eager else None
    row["remeasure_errors"] = rm.errors or None
    row["reference_drifted"] = rm.dropped()
    # the same on the Critic's own values (each run's, an hour apart), for comparison
    crit_best = r["cold"]["critic"][-1] if r["cold"]["critic"] else 1.0
    ct = REACH * crit_best if REACH * crit_best > 1.0 else None
    row.update(critic_cold_best=round(crit_best, 4), critic_cold_evals=reach(r["cold"]["critic"], ct) if ct else None,
               critic_warm_evals=reach(r["warm"]["critic"], ct) if ct else None)
    return row


def residuals(remeasured: list[Remeasured]) -> list[float]:
    """Every kept measurement's log distance from its candidate's mean over rounds (candidates with
    at least three rounds; scaled so the spread is unbiased): the machine's round-to-round noise."""
    out: list[float] = []
    for rm in remeasured:
        for key in rm.values:
            logs = [math.log(v) for v in rm.kept(key) if v > 0]
            if len(logs) >= 3:
                m, k = statistics.fmean(logs), math.sqrt(len(logs) / (len(logs) - 1))
                out += [(x - m) * k for x in logs]
    return out


def false_worse(noise: list[float], rounds: int, trials: int = 20000, seed: int = 0) -> float | None:
    """The probability that two finals of equal speed, each measured ``rounds`` times with this
    noise, read "worse" (the ratio of their medians below 1 - NOISE): how often the judge errs."""
    if len(noise) < 10 or rounds < 1:
        return None
    rng = random.Random(seed)
    bad = 0
    for _ in range(trials):
        a = statistics.median(rng.choice(noise) for _ in range(rounds))
        b = statistics.median(rng.choice(noise) for _ in range(rounds))
        bad += math.exp(a - b) < 1 - NOISE
    return bad / trials


def medians(rows: list[dict], cold: str, warm: str, min_cold: int = MIN_COLD
            ) -> tuple[float | None, int, float | None, int]:
    """(median warm/cold over problems with a target, n, the same over those whose cold run needed
    at least ``min_cold`` evaluations, n); a warm run that never reached the target counts as
    infinite."""
    scored = [((r[warm] / r[cold]) if r[warm] else float("inf"), r[cold]) for r in rows if not r["error"] and r[cold]]
    ratios = [x for x, _ in scored]
    searched = [x for x, n in scored if n >= min_cold]
    return (statistics.median(ratios) if ratios else None, len(ratios),
            statistics.median(searched) if searched else None, len(searched))


def goal_met(median_searched: float | None, n_searched: int) -> bool:
    """The evaluations goal: median warm/cold <= GOAL_RATIO over at least MIN_PROBLEMS problems
    whose cold run needed MIN_COLD evaluations or more."""
    return median_searched is not None and n_searched >= MIN_PROBLEMS and median_searched <= GOAL_RATIO


def median_floor(rows: list[dict], cold: str) -> float | None:
    """The lowest median warm/cold any warm start could reach on these problems: every warm run
    reaching the target at its first evaluation (ratio 1/cold). A problem whose cold run reached
    it at evaluation 1 contributes 1.0 whatever knowledge does, so when half the problems do, the
    goal of <= 0.5 is out of reach of the warm start by arithmetic, not by its quality."""
    best = [1.0 / r[cold] for r in rows if not r["error"] and r[cold]]
    return statistics.median(best) if best else None

"""Warm-start priors: what records of similar problems on the same hardware class say about
each move.

Per move, records are weighted by the similarity of their problem to this one; the move's
probability of acceptance is a Beta posterior around the skill's own prior (``PSEUDO_TRIALS``
pseudo-observations of it), so one lucky record cannot dominate. Negative knowledge ranks low:
crashes, regressions and no-gains count as failed trials, and a candidate the Critic flagged
(``hack_suspected``, ``incorrect``) or that was later revoked as hostile/incorrect counts as a
failure and divides the prior again. Quarantine: only a record whose candidate passed every
integrity gate and was never revoked can count as a success — a win that was never proven
honest never raises a prior. The result is a prior, never a verdict: the warm-started move is
measured and judged like any other.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .signature import similarity

PSEUDO_TRIALS = 2.0
MIN_SIMILARITY = 0.6
FLAG_PENALTY = 0.25
FLAGGED = {"hack_suspected", "incorrect"}
FAILED = {"compile_error", "runtime_error", "timeout", "oom", "harness_error", "startup_failed",
          "accuracy_regression", "regression", "no_gain", "unstable"}
MIN_PRIOR = 0.01


@dataclass(frozen=True)
class WarmPrior:
    move_id: str
    prior: float  # the warm prior (replaces the skill's)
    base: float  # the skill's prior
    records: int
    weight: float  # summed similarity of the records used
    wins: int
    failures: int
    flagged: int
    mean_win_log: float | None  # mean log-speedup of its honest wins

    def to_json(self) -> dict:
        return asdict(self)


def _outcome(r) -> str:  # type: ignore[no-untyped-def]
    if r.revoked or not r.integrity_ok or r.diagnosis in FLAGGED:
        return "flagged"
    if r.decision == "accept" and r.diagnosis == "improved" and (r.speedup or 0) > 1:
        return "win"
    if r.diagnosis in FAILED or r.decision in ("reject", "fail"):
        return "failure"
    return "neutral"


def warm_priors(records: list, hardware_class: str, signature: dict, base_priors: dict[str, float],
                exclude_campaign: str | None = None, min_similarity: float = MIN_SIMILARITY
                ) -> dict[str, WarmPrior]:
    """Warm priors for the moves in ``base_priors`` ({move id: skill prior}) from ``records``."""
    acc: dict[str, dict] = {}
    for r in records:
        if r.move_id not in base_priors or r.campaign == exclude_campaign:
            continue
        if (r.hardware or {}).get("class") != hardware_class:
            continue
        w = similarity(signature, r.signature or {})
        if w < min_similarity:
            continue
        a = acc.setdefault(r.move_id, {"n": 0, "w": 0.0, "s": 0.0, "wins": 0, "fail": 0, "flag": 0, "logs": []})
        kind = _outcome(r)
        if kind == "neutral":
            continue
        a["n"] += 1
        a["w"] += w
        if kind == "win":
            a["s"] += w
            a["wins"] += 1
            a["logs"].append(math.log(r.speedup))
        elif kind == "failure":
            a["fail"] += 1
        else:
            a["flag"] += 1
    if not acc:
        return {}
    best_log = max((sum(a["logs"]) / len(a["logs"]) for a in acc.values() if a["logs"]), default=0.0)
    out = {}
    for move, a in acc.items():
        base = base_priors[move]
        p = (base * PSEUDO_TRIALS + a["s"]) / (PSEUDO_TRIALS + a["w"])
        mean_log = sum(a["logs"]) / len(a["logs"]) if a["logs"] else None
        if mean_log is not None and best_log > 0:  # among winners, the bigger win first
            p *= (1 + mean_log) / (1 + best_log)
        p *= FLAG_PENALTY ** a["flag"]
        out[move] = WarmPrior(move, max(MIN_PRIOR, min(1.0, p)), base, a["n"], round(a["w"], 3), a["wins"],
                              a["fail"], a["flag"], mean_log)
    return out

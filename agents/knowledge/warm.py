"""Warm-start priors: what records of similar problems on the same hardware class say about
each move.

Per move, records are weighted by the similarity of their problem to this one (``weight``); the move's
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


def weight(sim: float, min_similarity: float = MIN_SIMILARITY) -> float:
    """How much a record of a problem this similar counts: nothing at the threshold, rising to a
    whole trial for the same problem. Counting it by its similarity (0.6 for a problem at the
    threshold) let five wins of compile on problems 0.6-0.7 alike outvote the skill's first choice
    on a convolution epilogue where that choice was worth 2.8x and compile 1.6x (warm-start run of
    2026-11-27), and made a cliff at the threshold: a 0.59 record counted nothing, a 0.61 one 61%."""
    if sim < min_similarity or min_similarity >= 1.0:
        return 0.0
    return (sim - min_similarity) / (1.0 - min_similarity)


def outcome(r) -> str:  # type: ignore[no-untyped-def]
    if r.revoked or not r.integrity_ok or r.diagnosis in FLAGGED:
        return "flagged"
    if r.decision == "accept" and r.diagnosis == "improved" and _gain_log(r) is not None:
        return "win"
    if r.diagnosis in FAILED or r.decision in ("reject", "fail"):
        return "failure"
    return "neutral"


def _gain_log(r) -> float | None:  # type: ignore[no-untyped-def]
    """What the move itself gained: log of its speedup over its parent's."""
    if r.speedup is None or r.speedup <= 0:
        return None
    g = math.log(r.speedup / (r.parent_speedup or 1.0))
    return g if g > 0 else None


def path_key(path) -> tuple:  # type: ignore[no-untyped-def]
    """Moves applied so far, as a multiset: the order of independent moves rarely matters."""
    return tuple(sorted(m for m in path if m))


class _Acc:
    def __init__(self) -> None:
        self.n, self.w, self.s, self.wins, self.fail, self.flag, self.logs = 0, 0.0, 0.0, 0, 0, 0, []

    def add(self, kind: str, w: float, r) -> None:  # type: ignore[no-untyped-def]
        self.n += 1
        self.w += w
        if kind == "win":
            self.s += w
            self.wins += 1
            self.logs.append(_gain_log(r))
        elif kind == "failure":
            self.fail += 1
        else:
            self.flag += 1

    def without(self, part: "_Acc") -> "_Acc":
        """These records less ``part`` (a subset of them): the move's records on other paths."""
        out = _Acc()
        out.n, out.w, out.s = self.n - part.n, self.w - part.w, self.s - part.s
        out.wins, out.fail, out.flag = self.wins - part.wins, self.fail - part.fail, self.flag - part.flag
        out.logs = list(self.logs)
        for x in part.logs:
            out.logs.remove(x)
        return out

    @property
    def mean_log(self) -> float | None:
        return sum(self.logs) / len(self.logs) if self.logs else None

    def posterior(self, base: float, pseudo: float, best_log: float) -> float:
        p = (base * pseudo + self.s) / (pseudo + self.w)
        if self.mean_log is not None and best_log > 0:  # among winners, the bigger win first
            p *= (1 + self.mean_log) / (1 + best_log)
        p *= FLAG_PENALTY ** self.flag
        return max(MIN_PRIOR, min(1.0, p))


def warm_priors(records: list, hardware_class: str, signature: dict, base_priors: dict[str, float],
                exclude_campaign: str | None = None, min_similarity: float = MIN_SIMILARITY
                ) -> tuple[dict[str, WarmPrior], dict[tuple[tuple, str], float]]:
    """Warm priors for the moves in ``base_priors`` ({move id: skill prior}) from ``records``:
    per move (any parent), and per (moves already applied, move) — the second reproduces what
    worked *after* what, the way a recorded recipe does, and wins where it applies."""
    acc: dict[str, _Acc] = {}
    ctx_acc: dict[tuple[tuple, str], _Acc] = {}
    for r in records:
        if r.move_id not in base_priors or r.campaign == exclude_campaign:
            continue
        if (r.hardware or {}).get("class") != hardware_class:
            continue
        w = weight(similarity(signature, r.signature or {}), min_similarity)
        if w <= 0:
            continue
        kind = outcome(r)
        if kind == "neutral":
            continue
        path = path_key(r.path or [])
        acc.setdefault(r.move_id, _Acc()).add(kind, w, r)
        ctx_acc.setdefault((path, r.move_id), _Acc()).add(kind, w, r)
    if not acc:
        return {}, {}
    best_log = max((a.mean_log for a in acc.values() if a.mean_log is not None), default=0.0)
    out = {}
    for move, a in acc.items():
        base = base_priors[move]
        out[move] = WarmPrior(move, a.posterior(base, PSEUDO_TRIALS, best_log), base, a.n, round(a.w, 3),
                              a.wins, a.fail, a.flag, a.mean_log)
    best_in: dict[tuple, float] = {}
    for (path, _), a in ctx_acc.items():
        if a.mean_log is not None:
            best_in[path] = max(best_in.get(path, 0.0), a.mean_log)
    by_path = {}
    for (path, move), a in ctx_acc.items():
        # what the move did after other moves, each record counted once, is the prior of what it
        # does after these: built around the move's warm prior, the records of this context
        # counted twice (at the baseline that was nearly all of them, and five small compile wins
        # outranked a skill's 2.8x first choice)
        base = acc[move].without(a).posterior(base_priors[move], PSEUDO_TRIALS, 0.0)
        by_path[(path, move)] = round(a.posterior(base, 1.0, best_in.get(path, 0.0)), 4)
    return out, by_path

"""Calibration of the agents' predictions: the Brier score of P(accept) and the error of the
predicted log-speedup, per agent and move family.

A prediction is only worth following if it is calibrated, so a family whose P(accept) has been
poorly calibrated gets its priors *shrunk* toward the family's observed acceptance rate
(``shrink``): the ranking keeps what the prior says only in proportion to how well it has
predicted outcomes so far.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# A family's priors are shrunk only when their Brier score is worse than always answering the
# family's observed acceptance rate r (Brier r(1-r)) — the prior then predicts worse than knowing
# nothing per move (beyond TOLERANCE, so a confident and right prior is never shrunk); SPAN of
# excess Brier takes the weight down to MIN_WEIGHT.
TOLERANCE, SPAN, MIN_WEIGHT, MIN_OBSERVATIONS = 0.05, 0.2, 0.2, 3


@dataclass
class Tally:
    n: int = 0
    sq: float = 0.0  # summed (p - outcome)^2
    accepted: int = 0
    log_n: int = 0
    log_abs: float = 0.0  # summed |predicted - actual| log-speedup
    log_bias: float = 0.0  # summed predicted - actual

    def add(self, p: float | None, accepted: bool, predicted_log: float | None, actual_log: float | None) -> None:
        if p is not None:
            self.n += 1
            self.sq += (min(max(p, 0.0), 1.0) - float(accepted)) ** 2
            self.accepted += int(accepted)
        if predicted_log is not None and actual_log is not None:
            self.log_n += 1
            self.log_abs += abs(predicted_log - actual_log)
            self.log_bias += predicted_log - actual_log

    @property
    def brier(self) -> float | None:
        return self.sq / self.n if self.n else None

    def row(self) -> dict:
        return {"n": self.n, "brier": None if self.brier is None else round(self.brier, 4),
                "accept_rate": round(self.accepted / self.n, 3) if self.n else None,
                "log_n": self.log_n,
                "log_mae": round(self.log_abs / self.log_n, 4) if self.log_n else None,
                "log_bias": round(self.log_bias / self.log_n, 4) if self.log_n else None}


@dataclass
class Calibration:
    by_agent: dict[str, Tally] = field(default_factory=dict)
    by_family: dict[str, Tally] = field(default_factory=dict)

    def add(self, agent: str, family: str | None, p: float | None, accepted: bool,
            predicted_log: float | None, actual_log: float | None) -> None:
        for table, key in ((self.by_agent, agent), (self.by_family, family or "-")):
            table.setdefault(key, Tally()).add(p, accepted, predicted_log, actual_log)

    def to_json(self) -> dict:
        return {"agents": {k: v.row() for k, v in sorted(self.by_agent.items())},
                "families": {k: v.row() for k, v in sorted(self.by_family.items())}}


def shrink_weight(tally: Tally | None) -> float:
    """How much of a family's prior to keep (1: all) given how it has predicted so far."""
    if tally is None or tally.n < MIN_OBSERVATIONS or tally.brier is None:
        return 1.0
    rate = tally.accepted / tally.n
    excess = tally.brier - rate * (1 - rate) - TOLERANCE
    return 1.0 if excess <= 0 else max(MIN_WEIGHT, 1.0 - excess / SPAN)


def shrink(prior: float, tally: Tally | None) -> float:
    """``prior`` pulled toward the family's observed acceptance rate, by its calibration."""
    if tally is None or not tally.n:
        return prior
    w = shrink_weight(tally)
    rate = (tally.accepted + 0.5) / (tally.n + 1.0)
    return w * prior + (1 - w) * rate


def log_or_none(x: float | None) -> float | None:
    return math.log(x) if x is not None and x > 0 else None

"""Per-campaign token and cost budget, shared by every LLM agent of a campaign.

Enforced before each call, not after: a request is only sent when the estimated prompt plus the
completion allowance fit in what is left, and the completion allowance (``max_tokens`` of the
request) is cut down to fit. So a server that honours ``max_tokens`` can never take the campaign
over budget, and one that does not is stopped at its first overrun. Usage comes from the
server's ``usage`` field (an estimate only when the server sends none) and is restored from the
store's events on resume, so the budget spans every run of a campaign.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from .config import BudgetConfig, Price
from .errors import LLMBudgetExceeded

MIN_COMPLETION_TOKENS = 64  # below this no structured reply fits; refuse rather than waste a call


def approx_tokens(text: str) -> int:
    """Conservative token estimate (about 3 bytes per token: code and JSON tokenise densely).
    Used only for planning; accounting uses the server's counts."""
    return math.ceil(len(text.encode("utf-8")) / 3) + 4


@dataclass(frozen=True)
class UsageSnapshot:
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    calls: int
    max_tokens: int | None
    max_cost_usd: float | None
    exhausted: str | None  # why the budget stopped the campaign, if it did

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class LLMBudget:
    def __init__(self, cfg: BudgetConfig):
        self.cfg = cfg
        self._lock = threading.Lock()
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd = 0.0
        self.calls = 0
        self._refused: str | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def restore(self, prompt_tokens: int, completion_tokens: int, cost_usd: float) -> None:
        """Usage of earlier runs of the same campaign (summed from its events)."""
        with self._lock:
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
            self.cost_usd += cost_usd

    def plan(self, est_prompt_tokens: int, want_completion: int, price: Price) -> int:
        """The completion allowance for the next call, or LLMBudgetExceeded (nothing is sent)."""
        with self._lock:
            allow = want_completion
            if self.cfg.max_tokens is not None:
                allow = min(allow, self.cfg.max_tokens - self.tokens - est_prompt_tokens)
            if self.cfg.max_cost_usd is not None and price.completion_per_1k > 0:
                left = self.cfg.max_cost_usd - self.cost_usd - price.cost(est_prompt_tokens, 0)
                allow = min(allow, int(left / price.completion_per_1k * 1000))
            elif self.cfg.max_cost_usd is not None and price.cost(est_prompt_tokens, 0) + self.cost_usd > self.cfg.max_cost_usd:
                allow = -1
            if allow < min(MIN_COMPLETION_TOKENS, want_completion):
                self._refused = self._describe(est_prompt_tokens)
                raise LLMBudgetExceeded(self._refused)
            return allow

    def charge(self, prompt_tokens: int, completion_tokens: int, cost_usd: float) -> None:
        with self._lock:
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
            self.cost_usd += cost_usd
            self.calls += 1

    def _describe(self, est_prompt: int) -> str:
        parts = []
        if self.cfg.max_tokens is not None:
            parts.append(f"{self.tokens} of max_tokens={self.cfg.max_tokens} tokens used")
        if self.cfg.max_cost_usd is not None:
            parts.append(f"${self.cost_usd:.4f} of max_cost_usd={self.cfg.max_cost_usd}")
        return (f"budget: LLM {', '.join(parts)}; the next call needs about {est_prompt} prompt tokens "
                f"plus a reply — raise budget.max_tokens / budget.max_cost_usd to continue")

    def exhausted(self) -> str | None:
        with self._lock:
            if self._refused:
                return self._refused
            if self.cfg.max_tokens is not None and self.tokens >= self.cfg.max_tokens:
                return (f"budget: LLM {self.tokens} of max_tokens={self.cfg.max_tokens} tokens used — "
                        "raise budget.max_tokens to continue")
            if self.cfg.max_cost_usd is not None and self.cost_usd >= self.cfg.max_cost_usd:
                return (f"budget: LLM ${self.cost_usd:.4f} of max_cost_usd={self.cfg.max_cost_usd} spent — "
                        "raise budget.max_cost_usd to continue")
            return None

    def snapshot(self) -> UsageSnapshot:
        reason = self.exhausted()
        with self._lock:
            return UsageSnapshot(self.prompt_tokens, self.completion_tokens, self.cost_usd, self.calls,
                                 self.cfg.max_tokens, self.cfg.max_cost_usd, reason)

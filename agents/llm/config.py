"""Plain configuration objects for the LLM backend.

The campaign spec (``arbor.spec``) is translated into these in ``arbor.campaign.llm_setup``: agents never
import the core, so the same client can be used by benchmarks and tests without a campaign.
Only the NAME of the environment variable holding the API key lives here; the key itself is read
at client construction and kept inside the SDK client (see ``LLMRuntime.client``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

STRUCTURED_MODES = ("json_schema", "tools", "json_object", "text")


@dataclass(frozen=True)
class Price:
    """US dollars per 1,000 tokens."""

    prompt_per_1k: float = 0.0
    completion_per_1k: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return prompt_tokens / 1000.0 * self.prompt_per_1k + completion_tokens / 1000.0 * self.completion_per_1k


@dataclass(frozen=True)
class RoleConfig:
    """How one agent role talks to its endpoint."""

    role: str  # orchestrator | specialist | critic
    model: str
    base_url: str | None = None  # None: the SDK default (api.openai.com)
    api_key_env: str | None = None  # the NAME of an environment variable, never the key
    temperature: float | None = 0.2
    max_retries: int = 4  # transport retries (429, 5xx, timeouts, connection errors)
    timeout_s: float = 120.0
    structured_output: str = "auto"  # auto | json_schema | tools | json_object | text
    max_output_tokens: int = 4096
    prompt_tokens: int = 8000  # budget for the assembled prompt
    backoff_s: float = 1.0  # first retry delay; doubles per retry, with jitter
    max_backoff_s: float = 30.0
    max_retry_after_s: float = 120.0  # a Retry-After longer than this is capped
    max_reply_chars: int = 1_000_000  # larger replies are refused as invalid output
    seed: int | None = None
    price: Price = field(default_factory=Price)

    @property
    def auto(self) -> bool:
        return self.structured_output == "auto"


@dataclass(frozen=True)
class BudgetConfig:
    max_tokens: int | None = None  # prompt + completion tokens over the whole campaign
    max_cost_usd: float | None = None
    max_failures_in_row: int = 3  # LLM calls that got no usable answer, in a row

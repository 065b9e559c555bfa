"""Errors an LLM call can end with. None of them escapes an agent: each agent records the
failure (an event), falls back or proposes nothing, and the loop's stop conditions decide
whether the campaign goes on (docs/architecture.md#stopping: a crash storm or a spent budget is
a stop reason)."""

from __future__ import annotations


class LLMError(RuntimeError):
    """Base class; ``str()`` is one line safe to store (secrets already redacted)."""


class LLMUnavailable(LLMError):
    """The endpoint did not answer usefully after every transport retry (429, 5xx, timeouts,
    refused connections)."""


class LLMRejected(LLMError):
    """The endpoint refused the request itself (4xx other than 408/409/429): bad model name,
    bad key, unsupported parameter. Retrying the same request cannot help."""


class LLMInvalidOutput(LLMError):
    """The reply could not be parsed into the expected model, even after one repair request."""


class LLMBudgetExceeded(LLMError):
    """The campaign's token or cost budget cannot cover the next call; nothing was sent."""

"""The LLM backend the agents share: client, structured output, budget, audit, runtime, prompts,
role texts and reply schemas.

Everything here talks to any OpenAI-compatible endpoint through the openai SDK: OpenAI itself,
vLLM, SGLang, Ollama and llama.cpp servers. The LLM agents live with their roles —
``orchestrator/llm.py``, ``specialists/kernel_llm.py`` and ``serving_llm.py``,
``critic/narrator.py`` — and implement the same contracts (``agents/contracts.py``) as the
heuristic ones, so the loop cannot tell them apart and any mix of the two backends works. Nothing
in this package imports those agents.
"""

from .budget import LLMBudget
from .client import LLMClient, Reply
from .config import BudgetConfig, Price, RoleConfig
from .errors import LLMBudgetExceeded, LLMError, LLMInvalidOutput, LLMRejected, LLMUnavailable
from .runtime import LLMRuntime

__all__ = [
    "BudgetConfig", "LLMBudget", "LLMBudgetExceeded", "LLMClient", "LLMError", "LLMInvalidOutput",
    "LLMRejected", "LLMRuntime", "LLMUnavailable", "Price", "Reply", "RoleConfig",
]

"""LLM backends for the Orchestrator, the Specialists and the Critic (DESIGN §7).

Everything here talks to any OpenAI-compatible endpoint through the openai SDK: OpenAI itself,
vLLM, SGLang, Ollama and llama.cpp servers. Agents built here keep the heuristic agents'
interfaces, so the loop cannot tell them apart and any mix of the two backends works.
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

"""The ``agents:`` section of a campaign spec: backend, policy and the LLM settings per role
(imported by ``arbor.spec``).

Credentials never reach the store: the spec is saved with the campaign, so keys are named by
environment variable and endpoints may not carry them.
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from .base import Strict


StructuredMode = Literal["auto", "json_schema", "tools", "json_object", "text"]
LLM_ROLES = ("orchestrator", "specialist", "critic")


def _env_name(v: str | None) -> str | None:
    """api_key_env holds the NAME of an environment variable; a key pasted here would end up in
    the store (the spec is saved with the campaign), so anything key-shaped is refused."""
    if v is None:
        return v
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", v) or (len(v) > 24 and not v.isupper()):
        raise ValueError("must be the NAME of an environment variable (e.g. OPENAI_API_KEY), not the key itself")
    return v


def _endpoint(v: str | None) -> str | None:
    """The spec is stored with the campaign: credentials in the URL would be stored with it."""
    if v is None:
        return v
    parts = urlsplit(v)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http(s) URL such as http://127.0.0.1:8000/v1")
    if parts.username or parts.password:
        raise ValueError("must not carry credentials — put the key in an environment variable named by api_key_env")
    return v


class _Endpoint(Strict):
    """Where the shared settings and every role's overrides name an endpoint and a key variable."""

    @field_validator("api_key_env", check_fields=False)
    @classmethod
    def _env(cls, v: str | None) -> str | None:
        return _env_name(v)

    @field_validator("base_url", check_fields=False)
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return _endpoint(v)


class AgentRole(_Endpoint):
    """Per-role overrides of the LLM settings in ``agents:`` (unset fields inherit them)."""

    backend: Literal["heuristic", "openai"] | None = None
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_retries: int | None = Field(default=None, ge=0, le=20)
    timeout_s: float | None = Field(default=None, gt=0)
    structured_output: StructuredMode | None = None
    max_output_tokens: int | None = Field(default=None, ge=64)
    prompt_tokens: int | None = Field(default=None, ge=500)


class Agents(_Endpoint):
    backend: Literal["heuristic", "openai"] = "heuristic"
    seed: int = 0
    policy: Literal["puct", "ucb1", "greedy", "random"] = "puct"
    exploration: float = Field(default=1.0, ge=0)
    proposals_per_step: int = Field(default=1, ge=1, le=16)
    family_posterior: bool = Field(default=True, description=(
        "a verdict on one move updates its family's priors (docs/architecture.md#scoring); false is "
        "the ablation benchmarks/family_waste.py runs as its 'before'"))
    # LLM settings shared by every role whose backend is openai (roles below override them)
    base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint; unset = api.openai.com")
    model: str | None = None
    api_key_env: str | None = Field(default=None, description="NAME of the env variable holding the key")
    temperature: float = Field(default=0.2, ge=0, le=2)
    max_retries: int = Field(default=4, ge=0, le=20)
    timeout_s: float = Field(default=120, gt=0)
    structured_output: StructuredMode = "auto"
    max_output_tokens: int = Field(default=4096, ge=64)
    prompt_tokens: int = Field(default=8000, ge=500, description="token budget of one assembled prompt")
    retry_backoff_s: float = Field(default=1.0, ge=0, le=60)
    max_llm_failures_in_row: int = Field(default=3, ge=1, description="stop after N LLM calls in a row fail")
    max_children: int = Field(default=4, ge=1, le=64, description="LLM specialists: children per node")
    orchestrator: AgentRole = Field(default_factory=AgentRole)
    specialist: AgentRole = Field(default_factory=AgentRole)
    critic: AgentRole = Field(default_factory=AgentRole)

    def role(self, name: str) -> dict:
        """Effective settings of one role: its overrides on top of the shared ones."""
        r: AgentRole = getattr(self, name)
        keys = [k for k in AgentRole.model_fields]
        return {k: getattr(r, k) if getattr(r, k) is not None else getattr(self, k) for k in keys}

    @model_validator(mode="after")
    def _llm_roles(self):
        for name in LLM_ROLES:
            eff = self.role(name)
            if eff["backend"] == "openai" and not eff["model"]:
                raise ValueError(f"{name} uses the openai backend but names no model — set agents.model "
                                 f"or agents.{name}.model")
        return self

"""Wiring the LLM backend into a campaign: spec → role configs → LLM agents, per role.

Kept apart from ``agent_setup`` so the shared file only decides *that* a role is an LLM one;
everything about *how* lives here. Any mix works: an LLM Orchestrator over heuristic
Specialists, heuristic selection over an LLM Specialist, an LLM narrator around the gate Critic.
API keys are looked up here by the variable's name, checked for presence (one-line error, exit 2)
and handed to the SDK client; they never enter the spec, the store, an event or a log line.
"""

from __future__ import annotations

import os
from typing import Any

from typing import TYPE_CHECKING

from arbor.agents.contracts import Critic, Orchestrator, Specialist
from arbor.agents.skills import SkillSpec
from arbor.search_tree.policies import Policy

from arbor.spec import LLM_ROLES, CampaignSpec, SpecError

if TYPE_CHECKING:  # the openai SDK is only imported by campaigns that use it
    from arbor.agents.llm import LLMRuntime, RoleConfig

    from arbor.targets import TargetAdapter
    from arbor.agents.specialists.serving_llm import Knob


def llm_roles(spec: CampaignSpec) -> list[str]:
    return [r for r in LLM_ROLES if spec.agents.role(r)["backend"] == "openai"]


def role_config(spec: CampaignSpec, role: str) -> "RoleConfig":
    from arbor.agents.llm import Price, RoleConfig

    eff = spec.agents.role(role)
    p = spec.budget.prices.get(eff["model"]) or spec.budget.prices.get("*")
    return RoleConfig(
        role=role, model=eff["model"], base_url=eff["base_url"], api_key_env=eff["api_key_env"],
        temperature=eff["temperature"], max_retries=eff["max_retries"], timeout_s=eff["timeout_s"],
        structured_output=eff["structured_output"], max_output_tokens=eff["max_output_tokens"],
        prompt_tokens=eff["prompt_tokens"], backoff_s=spec.agents.retry_backoff_s,
        max_backoff_s=max(spec.agents.retry_backoff_s * 32, 0.1), seed=spec.agents.seed,
        price=Price(p.prompt_per_1k, p.completion_per_1k) if p else Price(),
    )


def check_keys(spec: CampaignSpec) -> None:
    problems = []
    for role in llm_roles(spec):
        name = spec.agents.role(role)["api_key_env"]
        if name and not os.environ.get(name):
            problems.append(f"agents.{role}.api_key_env: environment variable {name} is not set — export it "
                            "before running (the key itself is never written to the spec or the store)")
    if problems:
        raise SpecError(sorted(set(problems)))


def target_summary(spec: CampaignSpec, target: TargetAdapter) -> str:
    return "; ".join([*target.brief(), f"objective: {spec.objective.direction} {spec.objective.metric}"])


def with_llm_agents(spec: CampaignSpec, target: TargetAdapter, skills: list[SkillSpec],
                    heuristic: tuple[Orchestrator, Specialist, Critic],
                    policy: Policy, store=None, campaign_id: int | None = None
                    ) -> tuple[Orchestrator, Specialist, Critic, "LLMRuntime"]:
    """Replace the roles whose backend is openai among the ``heuristic`` ones; returns
    (orchestrator, specialist, critic, runtime)."""
    from arbor.agents.llm import BudgetConfig, LLMRuntime
    from arbor.agents.critic.narrator import LLMCritic
    from arbor.agents.orchestrator.llm import LLMOrchestrator

    roles = llm_roles(spec)
    check_keys(spec)
    b = spec.budget
    runtime = LLMRuntime(BudgetConfig(max_tokens=b.max_tokens, max_cost_usd=b.max_cost_usd,
                                      max_failures_in_row=spec.agents.max_llm_failures_in_row))
    if store is not None and campaign_id is not None:
        runtime.bind(store, campaign_id)
    summary = target_summary(spec, target)
    orchestrator, specialist, critic = heuristic
    if "specialist" in roles:
        cfg = role_config(spec, "specialist")
        specialist = target.llm_specialist(runtime, skills, summary, spec.agents.max_children)
        specialist.client = runtime.client(cfg, specialist.name)
        if "orchestrator" not in roles:  # heuristic selection over the LLM specialist
            orchestrator.specialist = specialist
    if "orchestrator" in roles:
        orch = LLMOrchestrator(policy, specialist, None, runtime, skills, summary, seed=spec.agents.seed)
        orch.client = runtime.client(role_config(spec, "orchestrator"), orch.name)
        orchestrator = orch
    if "critic" in roles:
        narrator = LLMCritic(critic, None, runtime, skills, summary)
        narrator.client = runtime.client(role_config(spec, "critic"), narrator.agent)
        critic = narrator
    return orchestrator, specialist, critic, runtime

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

from arbor.agents.skills import SkillSpec

from .spec import LLM_ROLES, CampaignSpec, SpecError

if TYPE_CHECKING:  # the openai SDK is only imported by campaigns that use it
    from arbor.agents.llm import LLMRuntime, RoleConfig
    from arbor.agents.llm.serving_specialist import Knob


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


def target_summary(spec: CampaignSpec, target: Any) -> str:
    t = spec.target
    parts = [target.describe()]
    if getattr(t, "kind", None) == "kernel":
        atol, rtol = t.tolerances()
        parts.append(f"dtype {t.dtype or 'as the problem defines'}, tolerance atol={atol:g} rtol={rtol:g}")
        if t.sizes or t.size_scale:
            parts.append(f"sizes {dict(t.sizes)} scale {t.size_scale}")
    parts.append(f"objective: {spec.objective.direction} {spec.objective.metric}")
    return "; ".join(parts)


def _serving_knobs(target: Any) -> "list[Knob]":
    """The serving target's knob table as ``Knob``s (whatever shape the target exposes)."""
    from arbor.agents.llm.serving_specialist import Knob

    space = target.knob_space() if hasattr(target, "knob_space") else getattr(target, "knobs", None)
    if callable(space):
        space = space()
    if not space:
        raise SpecError([f"target: the {target.kind} target exposes no knob table — an LLM serving "
                         "specialist needs one (set agents.specialist.backend: heuristic)"])
    items = space.items() if isinstance(space, dict) else ((getattr(k, "name", None), k) for k in space)
    out = []
    for name, k in items:
        get = (lambda f, d=None: k.get(f, d)) if isinstance(k, dict) else (lambda f, d=None: getattr(k, f, d))
        choices = get("choices") or get("values")
        out.append(Knob(name=name or get("name"), kind=str(get("kind") or get("type") or "str"),
                        choices=tuple(choices) if choices else None, min=get("min"), max=get("max"),
                        description=get("description", "") or ""))
    return out


def _specialist(spec: CampaignSpec, target: Any, skills: list[SkillSpec], client, runtime: "LLMRuntime",
                summary: str):
    from arbor.agents.llm.kernel_specialist import LLMKernelSpecialist
    from arbor.agents.llm.serving_specialist import LLMServingSpecialist

    kw = {"max_children": spec.agents.max_children}
    if target.kind == "kernel":
        atol, rtol = spec.target.tolerances()
        return LLMKernelSpecialist(client, runtime, skills, summary, problem_source=target.problem.source,
                                   device=spec.target.device,
                                   tolerance=f"Outputs must match the reference within atol={atol:g}, rtol={rtol:g}.",
                                   **kw)
    extra: dict[str, Any] = {}
    for attr, kwarg in (("canonical", "canonical"), ("parse_artifact", "parse"), ("config_problem", "config_problem")):
        if callable(getattr(target, attr, None)):
            extra[kwarg] = getattr(target, attr)
    if callable(getattr(target, "symptoms", None)):
        def symptoms_of(node):
            m = runtime.last_measurement(node.id)
            return target.symptoms(m) if m is not None else None

        extra["symptoms_of"] = symptoms_of
    return LLMServingSpecialist(client, runtime, skills, summary, knobs=_serving_knobs(target),
                                device=getattr(spec.target, "device", None), **extra, **kw)


def with_llm_agents(spec: CampaignSpec, target: Any, skills: list[SkillSpec], agents, policy,
                    store=None, campaign_id: int | None = None):
    """Replace the roles whose backend is openai; returns (orchestrator, specialist, critic, runtime)."""
    from arbor.agents.llm import BudgetConfig, LLMRuntime
    from arbor.agents.llm.critic import LLMCritic
    from arbor.agents.llm.orchestrator import LLMOrchestrator

    roles = llm_roles(spec)
    check_keys(spec)
    b = spec.budget
    runtime = LLMRuntime(BudgetConfig(max_tokens=b.max_tokens, max_cost_usd=b.max_cost_usd,
                                      max_failures_in_row=spec.agents.max_llm_failures_in_row))
    if store is not None and campaign_id is not None:
        runtime.bind(store, campaign_id)
    summary = target_summary(spec, target)
    orchestrator, specialist, critic = agents.orchestrator, agents.specialist, agents.critic
    if "specialist" in roles:
        cfg = role_config(spec, "specialist")
        specialist = _specialist(spec, target, skills, None, runtime, summary)
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

"""Which agent implementations a campaign gets (docs/architecture.md#agents: every agent has a heuristic
and an LLM backend behind one interface). The loop only sees the three roles."""

from __future__ import annotations

from dataclasses import dataclass

from arbor.agents.contracts import Critic, Orchestrator, Specialist
from arbor.agents.critic.critic import HeuristicCritic
from arbor.agents.orchestrator.heuristic import HeuristicOrchestrator
from arbor.agents.skills import SkillSpec
from arbor.search_tree.policies import make_policy
from arbor.spec import CampaignSpec
from arbor.targets import TargetAdapter

from .llm_setup import llm_roles, with_llm_agents


@dataclass
class Agents:
    orchestrator: Orchestrator
    specialist: Specialist
    critic: Critic
    llm: object | None = None  # the LLMRuntime (budget, failure streak) when any role is an LLM


def build_agents(spec: CampaignSpec, target: TargetAdapter, skills: list[SkillSpec],
                 store=None, campaign_id: int | None = None) -> Agents:
    """Heuristic agents for every role, then the roles whose backend is ``openai`` are replaced
    (``arbor.campaign.llm_setup``); ``store``/``campaign_id`` let LLM agents audit into the store.
    The target picks its own specialists (``TargetAdapter.heuristic_specialist``)."""
    specialist = target.heuristic_specialist(skills, spec.agents.seed, store)
    critic = HeuristicCritic(spec.critic.gate_config(spec.agents.seed))
    policy = make_policy(spec.agents.policy, spec.agents.exploration)
    orchestrator = HeuristicOrchestrator(policy, specialist, seed=spec.agents.seed,
                                         family_posterior=spec.agents.family_posterior)
    agents = Agents(orchestrator, specialist, critic)
    if llm_roles(spec):
        agents = Agents(*with_llm_agents(spec, target, skills, (orchestrator, specialist, critic), policy, store,
                                         campaign_id))
    return agents

"""Which agent implementations a campaign gets (DESIGN §7: every agent has a heuristic and an
LLM backend behind one interface). The loop only sees the three roles."""

from __future__ import annotations

from dataclasses import dataclass

from arbor.agents.critic.critic import HeuristicCritic
from arbor.agents.critic.gates import CriticConfig
from arbor.agents.orchestrator import HeuristicOrchestrator
from arbor.agents.skills import SkillSpec
from arbor.agents.specialists.kernel_heuristic import HeuristicKernelSpecialist
from arbor.search_tree.policies import make_policy

from .spec import CampaignSpec
from .targets import TargetAdapter


@dataclass
class Agents:
    orchestrator: HeuristicOrchestrator
    specialist: HeuristicKernelSpecialist
    critic: HeuristicCritic


def critic_config(spec: CampaignSpec) -> CriticConfig:
    c = spec.critic
    return CriticConfig(max_cv=c.max_cv, confidence=c.confidence, resamples=c.bootstrap_resamples,
                        min_speedup=c.min_speedup, max_remeasures=c.max_remeasures, seed=spec.agents.seed)


def build_agents(spec: CampaignSpec, target: TargetAdapter, skills: list[SkillSpec]) -> Agents:
    specialist = HeuristicKernelSpecialist(target.moves(skills), seed=spec.agents.seed)
    critic = HeuristicCritic(critic_config(spec))
    policy = make_policy(spec.agents.policy, spec.agents.exploration)
    orchestrator = HeuristicOrchestrator(policy, specialist, seed=spec.agents.seed)
    return Agents(orchestrator, specialist, critic)

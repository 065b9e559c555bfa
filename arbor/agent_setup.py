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
    llm: object | None = None  # the LLMRuntime (budget, failure streak) when any role is an LLM


def critic_config(spec: CampaignSpec) -> CriticConfig:
    c = spec.critic
    return CriticConfig(max_cv=c.max_cv, confidence=c.confidence, resamples=c.bootstrap_resamples,
                        min_speedup=c.min_speedup, max_remeasures=c.max_remeasures, seed=spec.agents.seed,
                        mw_alpha=c.mw_alpha, confirm_new_best=c.confirm_new_best,
                        plausibility_slack=c.plausibility_slack, plausibility_flops=c.plausibility_flops,
                        min_timed_coverage=c.min_timed_coverage,
                        clock_tolerance_mhz=c.clock_tolerance_mhz, check_env=c.check_env,
                        reference_drift=c.reference_drift)


def _heuristic_specialist(spec: CampaignSpec, target: TargetAdapter, skills: list[SkillSpec], store):
    """Kernel targets get the AST-rewriting specialist; serving targets the knob specialist, whose
    moves fire on the parent's measured symptoms (read from the store)."""
    if target.kind != "serving":
        return HeuristicKernelSpecialist(target.moves(skills), seed=spec.agents.seed)
    from arbor.agents.specialists.serving_heuristic import HeuristicServingSpecialist

    def symptoms_of(node):
        ms = [m for m in store.measurements(node.id) if m.status == "ok"] if store is not None else []
        return target.symptoms(ms[-1]) if ms else None

    return HeuristicServingSpecialist(target.moves(skills), seed=spec.agents.seed, symptoms_of=symptoms_of,
                                      config_problem=target.config_problem)


def build_agents(spec: CampaignSpec, target: TargetAdapter, skills: list[SkillSpec],
                 store=None, campaign_id: int | None = None) -> Agents:
    """Heuristic agents for every role, then the roles whose backend is ``openai`` are replaced
    (``arbor.llm_setup``); ``store``/``campaign_id`` let LLM agents audit into the store."""
    specialist = _heuristic_specialist(spec, target, skills, store)
    critic = HeuristicCritic(critic_config(spec))
    policy = make_policy(spec.agents.policy, spec.agents.exploration)
    orchestrator = HeuristicOrchestrator(policy, specialist, seed=spec.agents.seed)
    agents = Agents(orchestrator, specialist, critic)
    from .llm_setup import llm_roles, with_llm_agents

    if llm_roles(spec):
        agents = Agents(*with_llm_agents(spec, target, skills, agents, policy, store, campaign_id))
    return agents

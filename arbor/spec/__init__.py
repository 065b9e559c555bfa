"""The campaign spec: what a user writes in a campaign YAML, validated.

* ``base``         — the strict base model and ``SpecError``;
* ``campaign``     — ``CampaignSpec``, loading and the one-line error messages;
* ``sections``     — objective, budget, sandbox, measurement, Critic, skills, store;
* ``agents``       — the ``agents:`` section (backends, policy, LLM roles);
* ``kernel``, ``serving``, ``replay`` — the ``target:`` model of each built-in kind;
* ``target_kinds`` — which target models a campaign may use (kinds register here).
"""

from .agents import LLM_ROLES, AgentRole, Agents, StructuredMode
from .base import SpecError, Strict, TargetModel
from .campaign import (CampaignSpec, format_validation_error, load_spec, parse_spec, register_target_model,
                       unregister_target_model)
from .kernel import DTYPE_TOLERANCE, PRECISION_TOLERANCE, KernelTarget, Precision, precision_of
from .replay import ReplayTarget
from .sections import (Budget, ClockTargetsCfg, Critic, DockerOptions, Measurement, Objective, Price, Sandbox,
                       Skills, StoreCfg)
from .serving import ServingTarget

__all__ = ["AgentRole", "Agents", "Budget", "CampaignSpec", "ClockTargetsCfg", "Critic", "DTYPE_TOLERANCE",
           "DockerOptions", "KernelTarget", "LLM_ROLES", "Measurement", "Objective", "PRECISION_TOLERANCE", "Precision",
           "Price", "ReplayTarget",
           "Sandbox", "ServingTarget", "Skills", "SpecError", "StoreCfg", "Strict", "StructuredMode", "TargetModel",
           "format_validation_error", "load_spec", "parse_spec", "precision_of", "register_target_model",
           "unregister_target_model"]

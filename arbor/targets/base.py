"""The adapter contract between the loop and a kind of target."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from arbor.agents.critic.critic import Judgement
from arbor.agents.critic.gates import Evidence
from arbor.agents.skills import MoveSpec, SkillSpec
from arbor.search_tree.records import MeasurementRecord

if TYPE_CHECKING:
    from arbor.sandbox.runner import Runner
    from arbor.spec import CampaignSpec


class TargetAdapter(ABC):
    kind: str
    artifact_kind: str

    def __init__(self, spec: "CampaignSpec"):
        self.spec = spec

    @abstractmethod
    def validate(self) -> None:
        """Raise a one-line user error if the target cannot run (missing files, bad format)."""

    @abstractmethod
    def root_source(self) -> str:
        """The baseline artifact (the reference itself): node 1 of every campaign."""

    @abstractmethod
    def moves(self, skills: list[SkillSpec]) -> list[MoveSpec]:
        """The heuristic specialist's move space for this target."""

    @abstractmethod
    def measure(self, runner: "Runner", source: str) -> dict:
        """Run the measurement protocol; returns the dict stored as one measurement series.
        Never raises for a bad candidate: failures are data (status/error_class)."""

    @abstractmethod
    def judge(self, critic, ev: Evidence, m: MeasurementRecord) -> Judgement:
        """Hand the stored measurement to the Critic's gates."""

    def static_check(self, critic, source: str) -> Judgement | None:
        return critic.static_check(source)

    def describe(self) -> str:
        return self.kind


def make_adapter(spec: "CampaignSpec") -> TargetAdapter:
    kind = spec.target.kind
    if kind == "kernel":
        from .kernel import KernelAdapter

        return KernelAdapter(spec)
    if kind == "replay":
        from .replay import ReplayAdapter

        return ReplayAdapter(spec)
    if kind == "serving":
        from .serving import ServingAdapter

        return ServingAdapter(spec)
    raise ValueError(f"unknown target kind '{kind}': use kernel or serving")

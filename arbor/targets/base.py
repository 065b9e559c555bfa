"""The adapter contract between the loop and a kind of target.

Everything that differs between kinds of target lives behind this class — what a node's
artifact is, how it is measured and judged, which specialists can edit it, how the campaign's
result is summarised and reported — so the loop, the CLI and the report never test a kind by
name. Class-level attributes are what readers of a finished store need without a spec.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from arbor.agents.contracts import Critic, Judgement, Specialist
from arbor.agents.critic.gates import Evidence
from arbor.agents.skills import MoveSpec, SkillSpec
from arbor.search_tree.records import MeasurementRecord

if TYPE_CHECKING:
    from arbor.sandbox.runner import Runner
    from arbor.search_tree.records import NodeRecord
    from arbor.search_tree.store import Store
    from arbor.spec import CampaignSpec


class TargetAdapter(ABC):
    kind: ClassVar[str]
    artifact_kind: ClassVar[str]
    # where ``arbor run`` writes the best artifact, beside the campaign
    best_artifact_name: ClassVar[str] = "best_modelnew.py"
    # re-measure the best and its contenders before reporting (off where the Critic's gates are
    # needed to turn samples into the objective, as for serving SLOs)
    verify_best: ClassVar[bool] = True
    # whether measurement samples are seconds (the summary then shows baseline and best times)
    reports_times: ClassVar[bool] = True
    # report wording: what the per-node score is, and whether a throughput–latency front exists
    score_label: ClassVar[str] = "speedup vs reference (x)"
    has_pareto_front: ClassVar[bool] = False

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
    def measure(self, runner: "Runner", source: str, timeout_s: float | None = None) -> dict:
        """Run the measurement protocol; returns the dict stored as one measurement series.
        Never raises for a bad candidate: failures are data (status/error_class). ``timeout_s``:
        a limit tighter than the sandbox's (what is left of the campaign's wall budget), where
        the target's jobs take one."""

    def prewarm(self, runner: "Runner") -> None:
        """Let ``runner`` get ready for this target's measurements before the first one (the
        local runner starts importing torch in its warm worker meanwhile). Default: nothing."""

    uses_device: ClassVar[bool] = True  # a measurement occupies a device (cores/GPU) of the worker
    profiles: ClassVar[bool] = False  # a bottleneck profile (per-op times) can be measured: request() + run_profile

    def worker_task(self, source: str):  # type: ignore[no-untyped-def]
        """What a parallel worker runs for ``source``: a picklable ``task(runner) -> dict``.
        By default the whole measurement; an adapter whose measurement needs this process's
        state (a replay's draw order) does that part here and ships only the rest."""
        return partial(_measure_on_worker, self, source)

    @abstractmethod
    def judge(self, critic: Critic, ev: Evidence, m: MeasurementRecord) -> Judgement:
        """Hand the stored measurement to the Critic's gates."""

    def static_check(self, critic: Critic, source: str) -> Judgement | None:
        return critic.static_check(source)

    def signature(self, trace: bool = True) -> dict:
        """The problem's signature for warm starts when no profile of the baseline exists
        (``agents/knowledge/signature.py``); ``{"error": ...}`` when it has none. ``trace=False``
        asks for the cheap form (no child process), for campaigns that share no knowledge."""
        return {"error": f"{self.kind} targets have no problem signature"}

    def describe(self) -> str:
        return self.kind

    def brief(self) -> list[str]:
        """What an LLM agent is told about the target (one phrase each), besides the objective."""
        return [self.describe()]

    def heuristic_specialist(self, skills: list[SkillSpec], seed: int, store: "Store | None" = None) -> Specialist:
        """The heuristic Specialist for this target: by default the one that applies skill moves
        to the artifact (AST rewrites and template constants)."""
        from arbor.agents.specialists.kernel_heuristic import HeuristicKernelSpecialist

        return HeuristicKernelSpecialist(self.moves(skills), seed=seed)

    def llm_specialist(self, runtime, skills: list[SkillSpec], summary: str, max_children: int) -> Specialist:
        """The LLM Specialist for this target (its client is attached by the caller)."""
        from arbor.spec import SpecError

        raise SpecError([f"target: the {self.kind} target exposes no knob table — an LLM serving "
                         "specialist needs one (set agents.specialist.backend: heuristic)"])

    def final_ratio(self, m: "MeasurementRecord") -> float | None:
        """The ratio vs the baseline of one final-verification measurement, or None when it is not
        trustworthy, for targets whose samples are not times (``reports_times`` False); kernel
        ratios are median time ratios (``arbor/campaign/verify.py``)."""
        return None

    @classmethod
    def objective_summary(cls, store: "Store", root_id: int | None, best: "NodeRecord | None") -> dict | None:
        """A summary of the result beyond one speedup (e.g. Pareto fronts), or None: then the
        campaign reports the baseline time, the best time and their ratio."""
        return None


def _measure_on_worker(target: "TargetAdapter", source: str, runner: "Runner") -> dict:
    return target.measure(runner, source)

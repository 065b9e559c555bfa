"""Kernel targets: KernelBench problems measured by the sandbox's kernel protocol."""

from __future__ import annotations

from functools import cached_property

from arbor.agents.contracts import Judgement
from arbor.agents.critic.gates import Evidence
from arbor.agents.skills import MoveSpec, SkillSpec, kernel_moves
from arbor.agents.specialists.applicability import drop_noops
from arbor.agents.transforms import to_modelnew
from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernel, prewarm
from arbor.sandbox.kernel.problem import Problem, load_problem
from arbor.sandbox.runner import Runner
from arbor.search_tree.records import MeasurementRecord

from .base import TargetAdapter


class KernelAdapter(TargetAdapter):
    kind = "kernel"
    artifact_kind = "kernel_source"
    profiles = True

    @cached_property
    def problem(self) -> Problem:
        return load_problem(self.spec.problem_path())

    def validate(self) -> None:
        self.problem  # noqa: B018 - loading validates (one-line ProblemError)

    def root_source(self) -> str:
        return self._root_source

    @cached_property
    def _root_source(self) -> str:  # every request compares against it (``request``): parse once
        return to_modelnew(self.problem.source)

    def moves(self, skills: list[SkillSpec]) -> list[MoveSpec]:
        return drop_noops(kernel_moves(skills, self.spec.target.device), self.spec.target.num_threads,
                          self.spec.target.device)

    def heuristic_specialist(self, skills: list[SkillSpec], seed: int, store=None):  # type: ignore[no-untyped-def]
        """The move-applying Specialist, with what the moves' ``when:`` conditions read about this
        campaign (device, precision) and its reference (traced at the campaign's sizes)."""
        from arbor.agents.specialists.kernel_facts import reference_facts
        from arbor.agents.specialists.kernel_heuristic import HeuristicKernelSpecialist

        t = self.spec.target

        def facts() -> dict:
            return {"device": t.device, "precision": t.precision,
                    **reference_facts(self.root_source(), dict(t.sizes), t.size_scale)}

        return HeuristicKernelSpecialist(self.moves(skills), seed=seed, facts=facts)

    def request(self, candidate_source: str, timeout_s: float | None = None) -> KernelRequest:
        """The harness request; ``timeout_s`` caps the sandbox's job limit (the wall budget left)."""
        t, m, sb, c = self.spec.target, self.spec.measurement, self.spec.sandbox, self.spec.critic
        # The root's A/A sets the noise floor every candidate is judged against: its interval's far
        # edge, so a floor of 3% needs a half-width near 1.5% (benchmarks/aa_floor.py --dev-set
        # --as-root; candidates keep the 2% target and may get more looks: sequential.py).
        aa = candidate_source == self.root_source()
        return KernelRequest(
            problem_source=self.problem.source, candidate_source=candidate_source, seeds=list(m.seeds),
            # unset tolerances: the harness applies the precision mode's (KernelBench's) to every
            # floating-point output; dtype is the mode's, and tells the harness the mode
            atol=t.atol, rtol=t.rtol, close_fraction=c.close_fraction, outlier_factor=c.outlier_factor,
            allow_degenerate=c.allow_degenerate_reference, quiet_s=c.quiet_window_s,
            sizes=dict(t.sizes), size_scale=t.size_scale, dtype=t.dtype,
            device=t.device, warmup_s=m.warmup_s, min_repeats=m.min_repeats,
            max_repeats=2 * m.max_repeats if aa else m.max_repeats,
            target_ci=m.baseline_target_ci if aa else KernelRequest.target_ci, time_budget_s=m.time_budget_s,
            min_sample_s=m.min_sample_s, clock=m.clock, num_threads=t.num_threads,
            timeout_s=min(sb.timeout_s, timeout_s) if timeout_s else sb.timeout_s,
            memory_bytes=int(sb.memory_gb * (1 << 30)) if sb.memory_gb else None,
        )

    def measure(self, runner: Runner, source: str, timeout_s: float | None = None) -> dict:
        return measure_kernel(runner, self.request(source, timeout_s)).to_dict()

    def prewarm(self, runner: Runner) -> None:
        prewarm(runner, self.request(self.root_source()))

    def static_check(self, critic, source: str) -> Judgement | None:
        return critic.static_check(source, frozenset(self.spec.critic.allow_imports), self.spec.target.precision)

    def judge(self, critic, ev: Evidence, m: MeasurementRecord) -> Judgement:
        return critic.judge(ev, m.baseline_samples or [], m.candidate_samples or [])

    def signature(self, trace: bool = True) -> dict:
        from .signature import from_source, problem_signature

        t = self.spec.target
        if not trace:
            return from_source(self.problem.path, t.dtype) or {"error": "problem source unreadable"}
        return problem_signature(self.problem.path, dict(t.sizes), t.size_scale, t.dtype)

    def describe(self) -> str:
        return f"kernel {self.problem.path.name} on {self.spec.target.device}"

    def brief(self) -> list[str]:
        t = self.spec.target
        atol, rtol = t.tolerances()
        parts = [self.describe(), f"precision {t.precision} (inputs and parameters cast to {t.dtype}; "
                 f"no move may compute below it), tolerance atol={atol:g} rtol={rtol:g}"]
        if t.sizes or t.size_scale:
            parts.append(f"sizes {dict(t.sizes)} scale {t.size_scale}")
        return parts

    def llm_specialist(self, runtime, skills: list[SkillSpec], summary: str, max_children: int):
        from arbor.agents.specialists.kernel_llm import LLMKernelSpecialist

        atol, rtol = self.spec.target.tolerances()
        return LLMKernelSpecialist(None, runtime, skills, summary, problem_source=self.problem.source,
                                   device=self.spec.target.device,
                                   tolerance=f"Outputs must match the reference within atol={atol:g}, rtol={rtol:g}.",
                                   max_children=max_children)

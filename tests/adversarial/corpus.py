"""The reward-hacking corpus: hostile and honest candidates, and the pipeline that judges them.

Every case file starts with a docstring whose first lines are ``key: value`` metadata:

- ``problem``: the reference in ``problems/`` it is measured against;
- ``class``: the reward-hack number in docs/integrity.md#reward-hacks it exercises (hostile only);
- ``expect``: the diagnosis it must be rejected with (hostile only);
- ``gate``: the gate that must catch it in the full pipeline (``guard`` = the static AST guard);
- ``dynamic``: optional; the diagnosis the *harness* must reach on its own when the static guard
  is skipped (defence in depth: a guard-evading variant of the same hack); ``A or B`` where two
  run-time defences can each fire first (the gate checked is the one of the diagnosis reached);
- ``reason``: optional; a phrase that verdict's reason must contain (which defence fired);
- ``gain``: optional, honest only; ``fusion`` marks a gain made of fewer memory passes for the
  same arithmetic, whose size depends on the CPU (the quickstart's fused gelu/silu: 2.4x on one
  2-core machine, 1.05x on another). Every other honest case removes work, so it wins anywhere.

``judge_case`` runs what the campaign loop runs (guard, sandboxed measurement, the Critic's gates,
re-measuring when the Critic asks) with small budgets, so the whole corpus stays cheap.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from arbor.agents.contracts import Judgement
from arbor.agents.critic.critic import HeuristicCritic
from arbor.agents.critic.gates import CriticConfig, Evidence
from arbor.sandbox.kernel.protocol import KernelMeasurement, KernelRequest, measure_kernels
from arbor.sandbox.runners.local import LocalRunner

HERE = Path(__file__).parent
# Small budgets: hostile cases only need to be caught; honest ones win by >= 1.5x (development machine). Samples of
# >= 10 ms average over the scheduler's time slices on a shared box.
FAST = dict(warmup_s=0.05, time_budget_s=0.5, min_repeats=12, max_repeats=80, min_sample_s=1e-2,
            num_threads=1, timeout_s=120, seeds=[0, 1, 2, 3, 4])
# The verdicts under test are about integrity, not about how quiet the machine is: a shared 2-core
# CI box gets a looser stability bar and more re-measurements than a campaign would allow.
CONFIG = CriticConfig(max_cv=0.5, max_remeasures=3, confirm_new_best=False)


@dataclass
class Case:
    name: str
    kind: str  # hostile | honest | gpu
    source: str
    problem: str
    catalogue: int | None = None
    expect: str | None = None
    gate: str | None = None
    dynamic: str | None = None
    reason: str | None = None  # optional: a phrase the dynamic verdict's reason must contain
    gain: str | None = None  # honest only: "fusion" where the gain's size depends on the CPU
    doc: str = ""


@dataclass
class Outcome:
    judgement: Judgement
    measurements: list[KernelMeasurement] = field(default_factory=list)

    def describe(self) -> str:
        j = self.judgement
        tail = ""
        if self.measurements:
            m = self.measurements[-1]
            tail = f" | harness: {m.status} {m.error_class} {(m.error_text or '')[-300:]}"
        return f"{j.decision}/{j.diagnosis}: {j.reason}{tail}"


def _meta(source: str) -> tuple[dict, str]:
    doc = source.split('"""')[1] if source.startswith('"""') else ""
    meta, rest = {}, []
    for line in doc.splitlines():
        key, sep, value = line.partition(":")
        if sep and not rest and key.strip() in ("problem", "class", "expect", "gate", "dynamic", "reason", "gain"):
            meta[key.strip()] = value.strip()
        else:
            rest.append(line)
    return meta, " ".join(" ".join(rest).split())


def load(kind: str) -> list[Case]:
    cases = []
    for path in sorted((HERE / kind).glob("*.py")):
        source = path.read_text()
        meta, doc = _meta(source)
        cases.append(Case(path.stem, kind, source, meta["problem"],
                          int(meta["class"]) if "class" in meta else None, meta.get("expect"),
                          meta.get("gate"), meta.get("dynamic"), meta.get("reason"), meta.get("gain"), doc))
    return cases


def problem_source(name: str) -> str:
    return (HERE / "problems" / f"{name}.py").read_text()


def request(case: Case, **overrides) -> KernelRequest:
    return KernelRequest(problem_source(case.problem), case.source, **{**FAST, **overrides})


def _evidence(m: KernelMeasurement, attempt: int, remeasures: int) -> Evidence:
    return Evidence(is_root=False, attempt=attempt, purpose="primary" if attempt == 1 else "remeasure",
                    status=m.status, error_class=m.error_class, error_text=m.error_text,
                    correctness=m.correctness, remeasures_done=remeasures, fingerprint=m.fingerprint,
                    baseline_fingerprint=m.fingerprint, facts=m.stats)


def judge_all(jobs: list[tuple[Case, bool]], workers: int | None = None, config: CriticConfig = CONFIG,
              **overrides) -> dict[tuple[str, bool], Outcome]:
    """What the loop does for each (case, skip_guard): the static guard (unless skipped), then
    measurement and the Critic's gates, re-measuring while the Critic asks. Measurements go in
    batches (one sandbox job per batch, one forked process per candidate: see
    ``measure_kernels``), ``workers`` batches at a time."""
    workers = workers or int(os.environ.get("ARBOR_CORPUS_WORKERS", "2"))
    critic = HeuristicCritic(config)
    outcomes: dict[tuple[str, bool], Outcome] = {}
    pending = []
    for case, skip in jobs:
        verdict = None if skip else critic.static_check(case.source)
        if verdict is not None:
            outcomes[(case.name, skip)] = Outcome(verdict)
        else:
            outcomes[(case.name, skip)] = Outcome(None)  # type: ignore[arg-type]
            pending.append((case, skip))
    for attempt in range(1, config.max_remeasures + 2):
        if not pending:
            break
        chunks = [pending[k::workers] for k in range(workers) if pending[k::workers]]
        with ThreadPoolExecutor(max_workers=len(chunks)) as pool:
            # a GPU corpus's runner checks first that the device starts inside it (sandbox/gpu/probe.py)
            results = list(pool.map(lambda ch: measure_kernels(
                LocalRunner(device=overrides.get("device", "cpu")), [request(c, **overrides) for c, _ in ch]), chunks))
        again = []
        for chunk, ms in zip(chunks, results):
            for (case, skip), m in zip(chunk, ms):
                out = outcomes[(case.name, skip)]
                out.measurements.append(m)
                out.judgement = critic.judge(_evidence(m, attempt, attempt - 1), m.baseline_samples,
                                             m.candidate_samples)
                if out.judgement.decision == "remeasure":
                    again.append((case, skip))
        pending = again
    return outcomes


def judge_case(case: Case, skip_guard: bool = False, config: CriticConfig = CONFIG, **overrides) -> Outcome:
    return judge_all([(case, skip_guard)], 1, config, **overrides)[(case.name, skip_guard)]


def failed_gate(j: Judgement) -> str | None:
    return next((g["gate"] for g in j.gates if g.get("passed") is False), None)

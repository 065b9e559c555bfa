"""Eager, ``torch.compile`` default and Arbor's verified best, measured in ONE harness job.

Each is a candidate against the same reference with the same paired, interleaved protocol as the
campaign, so the three numbers share inputs, sizes, threads and machine state. The eager entry is
the reference itself as ModelNew: its ratio is the noise of the comparison, printed with the rest.
"""

from __future__ import annotations

import statistics

from arbor.agents.transforms import apply_move, to_modelnew
from arbor.spec_runners import runner_for
from arbor.sandbox.kernel.protocol import measure_kernels

from ..spec import CampaignSpec
from ..targets import make_adapter


def compile_default(source: str) -> str | None:
    return apply_move(source, "wrap_compile", {"mode": "default", "dynamic": False})


def _ratio(m) -> float | None:  # type: ignore[no-untyped-def]
    if not m.ok or not m.baseline_samples or not m.candidate_samples:
        return None
    return statistics.median(m.baseline_samples) / statistics.median(m.candidate_samples)


def compare(spec: CampaignSpec, best_source: str | None) -> dict:
    """{"eager", "compile", "best"}: speedups vs the reference (None: failed, or no verified best
    to measure: the user keeps the reference, whose ratio is the eager entry's, and measuring it
    again as "best" cost a forked harness child per problem for a number nothing read)."""
    adapter = make_adapter(spec)
    base = to_modelnew(adapter.problem.source)
    sources = {"eager": base, "compile": compile_default(base), "best": best_source}
    names = [k for k, v in sources.items() if v is not None]
    runner = runner_for(spec, guarded=False)
    try:
        results = measure_kernels(runner, [adapter.request(sources[k]) for k in names])
    finally:
        runner.close()
    out: dict = {"errors": {}, "best": None}
    for name, m in zip(names, results):
        out[name] = _ratio(m)
        if not m.ok:
            first = (m.error_text or "").splitlines()[:1]
            out["errors"][name] = f"{m.error_class}: {first[0][:200] if first else ''}"
        if name == "eager" and m.baseline_samples:
            out["eager_ms"] = statistics.median(m.baseline_samples) * 1e3
    return out

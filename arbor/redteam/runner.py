"""Run variants through the path every candidate takes: ``arbor eval``'s throw-away campaign.

One campaign per run (``evaluate.eval_spec``: the same guard, sandbox, harness and Critic as any
campaign), with every variant enqueued as a user node: the serial loop drains them all — the
static guard first (a variant it rejects costs no sandbox run), then a measurement each, the
Critic's gates, and every re-measurement, fresh baseline probe and confirmation the gates ask for.

Batching: each variant's *first* measurement is taken beforehand, in batches (``measure_kernels``:
one sandbox job imports torch once and forks a process per candidate, so every candidate still
runs alone; ``workers`` batches side by side), with exactly the request the campaign's adapter
builds and a runner built like a campaign worker's. The adapter hands the loop that measurement
when it asks for it; everything after (re-measurements, probes, confirmations) runs live. Under
load a torch import costs seconds, so this is what makes 200+ variants take minutes.
"""

from __future__ import annotations

import statistics
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from arbor.spec import CampaignSpec
from arbor.targets.kernel import KernelAdapter

from .generator import Variant

# Measurement settings when no campaign file is given: the corpus's (tests/adversarial/corpus.py),
# enough to catch a cheat and to accept an honest 1.3x, and a quick machine-independent baseline
FAST = {"seeds": [0, 1, 2], "warmup_s": 0.05, "time_budget_s": 0.5, "min_repeats": 10, "max_repeats": 80,
        "min_sample_s": 0.01}


@dataclass
class Outcome:
    variant: Variant
    node: int | None
    state: str
    decision: str | None
    diagnosis: str | None
    reason: str | None
    gate: str | None  # the gate that decided (``guard``: never ran)
    speedup: float | None  # what the candidate claimed in its last measurement
    measurements: int

    @property
    def accepted(self) -> bool:
        return self.state == "accepted"

    def to_dict(self) -> dict:
        v = self.variant
        return {"id": v.id, "kind": v.kind, "class": v.klass, "disguise": v.disguise, "payload": v.payload,
                "origin": v.origin, "node": self.node, "state": self.state, "decision": self.decision,
                "diagnosis": self.diagnosis, "gate": self.gate, "reason": self.reason, "speedup": self.speedup,
                "measurements": self.measurements}


def redteam_spec(problem: Path, base: CampaignSpec | None, store_dir: Path, n: int, workers: int,
                 name: str = "redteam") -> CampaignSpec:
    """``arbor eval``'s spec with room for ``n`` candidates: heuristic agents (the red team's LLM,
    if any, writes variants, it never runs the loop), no final verification or confirmation, and
    without a campaign file the corpus's measurement settings on one intra-op thread."""
    from arbor.campaign.evaluate import eval_spec
    from arbor.spec import parse_spec

    spec = eval_spec(problem, base, store_dir)
    data = spec.model_dump(mode="json", exclude={"base_dir"})
    data.update(name=name, budget={**data["budget"], "max_evaluations": max(1, n), "max_wall_s": 7 * 24 * 3600},
                store={"url": f"sqlite:///{store_dir / (name + '.db')}"})
    data["agents"] = {"backend": "heuristic", "seed": data.get("agents", {}).get("seed", 0)}
    # no final verification, no confirmation of a new best: the red team asks "accepted at all?",
    # and one measurement fewer per candidate only makes an accepted cheat likelier (stricter)
    data["critic"] = {**data.get("critic", {}), "final_measurements": 0, "confirm_new_best": False}
    if base is None:
        data["measurement"] = {**data.get("measurement", {}), **FAST}
        data["target"] = {**data["target"], "num_threads": data["target"].get("num_threads") or 1}
    data.setdefault("executor", {})
    data["executor"] = {**(data["executor"] or {}), "workers": workers}
    return parse_spec(data, "<redteam>", store_dir)


def run(problem: Path, variants: list[Variant], base: CampaignSpec | None = None, workers: int = 1,
        out_dir: Path | None = None, name: str = "redteam", batch: int = 12,
        progress: Callable[[Variant, str], None] | None = None) -> list[Outcome]:
    """Every variant's outcome, in the order given."""
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        return _run(problem, variants, base, workers, out_dir, name, batch, progress)
    with tempfile.TemporaryDirectory(prefix="arbor-redteam-") as tmp:
        return _run(problem, variants, base, workers, Path(tmp), name, batch, progress)


class _Prefetched(KernelAdapter):
    """The kernel adapter, answering a source's first ``measure`` from a batch taken earlier."""

    def __init__(self, spec: CampaignSpec) -> None:
        super().__init__(spec)
        self.ready: dict[str, dict] = {}

    def measure(self, runner, source: str, timeout_s=None) -> dict:  # type: ignore[no-untyped-def]
        hit = self.ready.pop(source, None)
        return hit if hit is not None else super().measure(runner, source, timeout_s)


def _prefetch(target: _Prefetched, sources: list[str], workers: int, batch: int,
              done: Callable[[int], None]) -> None:
    from arbor.spec_runners import runner_for
    from arbor.sandbox.kernel.protocol import measure_kernels

    spec = target.spec
    chunks = [sources[i:i + batch] for i in range(0, len(sources), batch)]

    def one(chunk: list[str]) -> None:
        runner = runner_for(spec)
        try:
            for src, m in zip(chunk, measure_kernels(runner, [target.request(s) for s in chunk])):
                target.ready[src] = m.to_dict()
        finally:
            runner.close()
        done(len(chunk))

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(one, chunks))


def _run(problem: Path, variants: list[Variant], base: CampaignSpec | None, workers: int, store_dir: Path,
         name: str, batch: int, progress) -> list[Outcome]:  # type: ignore[no-untyped-def]
    from arbor.agents.critic.guard import check_source
    from arbor.campaign.enqueue import enqueue, open_for_write
    from arbor.campaign.run import run_campaign
    from arbor.search_tree import open_store

    db = store_dir / f"{name}.db"
    if db.exists():  # a fresh campaign per run: results never mix with an earlier run's
        db.unlink()
    allowed = frozenset((base.critic.allow_imports if base is not None else []) or [])
    runnable = [v.source for v in variants if not check_source(v.source, allowed)]  # the guard's cut
    # the budget is exactly the variants that will be measured: once they are drained the loop stops,
    # instead of letting the heuristic Orchestrator expand candidates of its own
    spec = redteam_spec(problem, base, store_dir, len(runnable), 1, name)
    target = _Prefetched(spec)
    target.validate()
    if runnable and batch > 0:  # the baseline first, in the same batches: timed beside the candidates
        runnable.insert(0, target.root_source())
        _prefetch(target, runnable, workers, batch,
                  lambda n: progress and progress(Variant("batch", "", "", "", "", ""), f"measured {n}"))
    store, camp, _ = open_for_write(spec)
    by_node: dict[int, Variant] = {}
    try:
        for v in variants:
            by_node[enqueue(store, camp, target, v.source, v.id).id] = v
    finally:
        store.close()

    def report(kind: str, data: dict) -> None:
        v = by_node.get(getattr(data.get("node"), "id", None))
        j = data.get("judgement")
        if progress is not None and v is not None and kind == "verdict" and j is not None:
            progress(v, f"{j.decision}/{j.diagnosis}")

    run_campaign(spec, report, target=target)
    store = open_store(spec.store_url(), read_only=True)
    try:
        return [_outcome(store, nid, v) for nid, v in by_node.items()]
    finally:
        store.close()


def _outcome(store, node_id: int, v: Variant) -> Outcome:  # type: ignore[no-untyped-def]
    node = store.get_node(node_id)
    verdicts = store.verdicts(node_id)
    last = verdicts[-1] if verdicts else None
    gate = next((g.get("gate") for g in reversed(last.gates or []) if g.get("passed") is False), None) if last else None
    stats = next((g["stats"] for vd in reversed(verdicts) for g in reversed(vd.gates or []) if "stats" in g), {})
    ms = store.measurements(node_id)
    speedup = stats.get("speedup")
    if speedup is None and ms and ms[-1].baseline_samples and ms[-1].candidate_samples:
        speedup = statistics.median(ms[-1].baseline_samples) / statistics.median(ms[-1].candidate_samples)
    return Outcome(v, node_id, node.state, last.decision if last else None, node.diagnosis or (last.diagnosis if last else None),
                   node.reason or (last.reason if last else None), gate, speedup, len(ms))

"""``arbor eval PROBLEM.py CANDIDATE.py``: one candidate through the campaign machinery.

Not a parallel implementation: a throw-away campaign in a temporary store holds the baseline
and the candidate (enqueued as a user node), one ``run_campaign`` measures both with the same
guard, sandbox, harness and Critic as any campaign, and the answer is read back from the
candidate's verdict. Measurement and Critic settings come from a campaign file when one is given
(``--spec``), else from the defaults.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from arbor.spec import CampaignSpec, parse_spec

from .enqueue import enqueue, open_for_write
from .run import run_campaign

COMPILE_FAILURES = {"compile_error", "syntax_error", "import_error"}


def eval_spec(problem: Path, base: CampaignSpec | None, store_dir: Path) -> CampaignSpec:
    data = base.model_dump(mode="json", exclude={"base_dir"}) if base is not None else {
        "target": {"kind": "kernel"}}
    data["target"]["problem"] = str(problem.resolve())
    data.update(name="eval", store={"url": f"sqlite:///{store_dir / 'eval.db'}"},
                budget={"max_evaluations": 1, "max_wall_s": 3600})
    data.pop("description", None)
    return parse_spec(data, "<eval>", store_dir)


def evaluate(problem: Path, candidate: Path, base: CampaignSpec | None = None, report=lambda *a: None) -> dict:
    source = candidate.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="arbor-eval-") as tmp:
        spec = eval_spec(problem, base, Path(tmp))
        store, camp, target = open_for_write(spec)
        try:
            node = enqueue(store, camp, target, source, candidate.name)
        finally:
            store.close()
        summary = run_campaign(spec, report)
        from arbor.search_tree import open_store

        store = open_store(spec.store_url(), read_only=True)
        try:
            return _result(store, store.get_node(node.id), summary)
        finally:
            store.close()


def _result(store, node, summary) -> dict:
    verdicts = store.verdicts(node.id)
    last = verdicts[-1] if verdicts else None
    stats = next((g["stats"] for v in reversed(verdicts) for g in reversed(v.gates) if "stats" in g), {})
    diag = node.diagnosis or (last.diagnosis if last else None)
    compiled = diag not in COMPILE_FAILURES
    correct = None if not compiled or diag in ("runtime_error", "timeout", "oom", "harness_error") \
        else diag not in ("incorrect", "accuracy_regression")
    speedup = node.speedup if node.speedup else stats.get("speedup")
    if summary.verified and summary.best_node == node.id and summary.speedup:
        speedup = summary.speedup
    ci = [stats.get("ci_low"), stats.get("ci_high")] if stats.get("ci_low") is not None else None
    return {"node": node.id, "state": node.state, "decision": last.decision if last else None,
            "diagnosis": diag, "reason": node.reason or (last.reason if last else None),
            "compiled": compiled, "correct": correct,
            "speedup": speedup if speedup is None or math.isfinite(speedup) else None, "ci": ci,
            "baseline_s": stats.get("baseline_median_s"), "candidate_s": stats.get("candidate_median_s"),
            "verified": bool(summary.verified and summary.best_node == node.id),
            "baseline_failed": summary.failed}

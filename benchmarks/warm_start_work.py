"""The warm-start benchmark's work directory (benchmarks/warm_start.py): which problems at which
size, each campaign's spec and store, the progress files two processes share, and a finished
campaign read back as the comparison needs it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from benchmarks.common import ROOT
from benchmarks.remeasure import curve

PROBLEMS = ROOT / "benchmarks" / "problems"
CALIBRATION = ROOT / "benchmarks" / "results" / "generalization_run" / "calibration.json"
FAST = {"measurement": {"seeds": [0, 1, 2], "warmup_s": 0.05, "time_budget_s": 0.5, "min_repeats": 10,
                        "min_sample_s": 0.002},
        "critic": {"max_cv": 0.5, "min_speedup": 1.02}, "sandbox": {"timeout_s": 180}}


def problem_paths(names: list[str] | None) -> list[Path]:
    paths = sorted(PROBLEMS.glob("l*.py"))
    if names:
        paths = [p for p in paths if any(p.stem == n or p.stem.startswith(n) for n in names)]
    return paths


def scales(paths: list[Path], fixed: float | None) -> dict[str, float]:
    """Each problem's size scale: ``fixed`` for all, else the suite's calibration (problems it
    lacks run at 1.0, said on stdout)."""
    if fixed is not None:
        return {p.stem: fixed for p in paths}
    try:
        cal = json.loads(CALIBRATION.read_text())
    except (OSError, ValueError):
        sys.exit(f"warm_start: no calibration at {CALIBRATION} — run `python -m benchmarks.generalization` "
                 "first, or pass --size-scale")
    out = {}
    for p in paths:
        if p.stem not in cal:
            print(f"{p.stem}: not in the calibration, run at size scale 1.0", flush=True)
        out[p.stem] = float((cal.get(p.stem) or {}).get("scale") or 1.0)
    return out


def _spec(tmp: Path, name: str, problem: Path, evaluations: int, scale: float, knowledge: str | None):
    from arbor.spec import parse_spec

    data = {"name": name, "target": {"kind": "kernel", "problem": str(problem), "num_threads": 1,
                                     "size_scale": scale},
            "budget": {"max_evaluations": evaluations, "max_wall_s": 1800}, **FAST,
            "store": {"url": f"sqlite:///{tmp}/{name}.db"}}
    if knowledge:
        data["knowledge"] = {"url": knowledge}
    return parse_spec(data, f"{name}.yaml", tmp)


def _evaluations(spec) -> tuple[list[str | None], list[float], dict[str, str], str | None]:  # type: ignore[no-untyped-def]
    """A campaign's candidates in creation order: the artifact key of each one the Critic accepted
    (None for the others), the Critic's best-so-far curve, the accepted sources by key, and the
    key of the campaign's final (verified) best (None: it kept the reference)."""
    from arbor.search_tree import open_store

    from arbor.campaign.run import summarize

    store = open_store(spec.store_url())
    try:
        camp = store.get_campaign(spec.name)
        nodes = sorted((n for n in store.nodes(camp.id) if n.parent_id is not None), key=lambda n: n.id)
        keys = [n.artifact_sha[:16] if n.state == "accepted" and n.speedup else None for n in nodes]
        sources = {n.artifact_sha[:16]: store.get_artifact(n.artifact_sha) for n, k in zip(nodes, keys) if k}
        final_id = summarize(store, spec.name).best_node
        final = next((n for n in nodes if n.id == final_id), None)  # None: the root (the reference)
        final_key = final.artifact_sha[:16] if final is not None else None
        if final is not None and final_key not in sources:  # a verified best is always measured again
            sources[final_key] = store.get_artifact(final.artifact_sha)
    finally:
        store.close()
    critic = curve(keys, {k: n.speedup for n, k in zip(nodes, keys) if k})
    return keys, critic, sources, final_key


def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _save(path: Path, outcome: dict) -> None:
    """One file per finished campaign: two processes sharing --work never overwrite each other."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(outcome, indent=2))
    os.replace(tmp, path)


def _work_dir(work: Path, evaluations: int, fixed_scale: float | None) -> Path:
    return work / (f"e{evaluations}-" + ("calibrated" if fixed_scale is None else f"s{fixed_scale}"))


def _finished_pair(tmp: Path, p: Path, evaluations: int, scale: float):  # type: ignore[no-untyped-def]
    """(cold spec, cold's _evaluations, warm's _evaluations) once both campaigns finished cleanly, else None."""
    c, w = _load(tmp / "progress" / f"cold-{p.stem}.json"), _load(tmp / "progress" / f"warm-{p.stem}.json")
    if not c or not w or c["error"] or w["error"]:
        return None
    cold_spec = _spec(tmp, f"cold-{p.stem}", p, evaluations, scale, None)
    return cold_spec, _evaluations(cold_spec), _evaluations(_spec(tmp, f"warm-{p.stem}", p, evaluations, scale, None))

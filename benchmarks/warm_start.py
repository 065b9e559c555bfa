"""Warm start, leave-one-out over the development problem set (benchmarks/problems/).

For each problem: a cold campaign (skill priors only), then a warm campaign whose knowledge store
holds the records of every *other* problem's cold campaign (never its own). Reported per problem:
evaluations until the best reached 95% of the cold run's final best, for cold and warm, and the
final (verified) best of each. Goals: warm needs <= 0.5x the evaluations of cold (median over
problems), and the warm final best is never worse than the cold one beyond the noise (NOISE).

Sizes: each problem at the scale the generalization suite calibrated for it (eager about 20 ms on
this machine, benchmarks/results/generalization_run/calibration.json), so the campaigns meet the
problems the suite measures; ``--size-scale`` forces one scale for all (at 0.25 most problems take
microseconds and nothing beats eager: a warm start has nothing to find).

Real kernel campaigns, so this is slow on a shared 2-core box: ``--problems`` picks a subset
(file stems or prefixes), ``--evaluations`` the budget of each campaign. Resumable: stores and
per-campaign progress files live in ``--work`` (default benchmarks/results/warm_start_run);
re-running the same command skips the campaigns already finished. ``--phase cold`` then
``--phase warm`` split the run, so two processes can share it with the same load in both phases
(the warm phase takes its knowledge from every cold campaign in ``--work``). A problem whose
campaign fails is a row with its error, not the end of the run.

    python -m benchmarks.warm_start --problems l1_04_swish,l1_01_relu,l2_10 --evaluations 6
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks.common import ROOT, table, write_result

PROBLEMS = ROOT / "benchmarks" / "problems"
CALIBRATION = ROOT / "benchmarks" / "results" / "generalization_run" / "calibration.json"
REACH, NOISE, GOAL_RATIO = 0.95, 0.05, 0.5
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


def _curve(spec) -> list[float]:  # type: ignore[no-untyped-def]
    """Best speedup after each evaluation (candidates in creation order)."""
    from arbor.search_tree import open_store

    store = open_store(spec.store_url())
    try:
        camp = store.get_campaign(spec.name)
        nodes = sorted((n for n in store.nodes(camp.id) if n.parent_id is not None), key=lambda n: n.id)
    finally:
        store.close()
    best, out = 1.0, []
    for n in nodes:
        if n.state == "accepted" and n.speedup:
            best = max(best, n.speedup)
        out.append(best)
    return out


def _reach(curve: list[float], target: float) -> int | None:
    return next((i for i, b in enumerate(curve, 1) if b >= target), None)


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


def _campaign(spec) -> tuple[float | None, float, str | None]:  # type: ignore[no-untyped-def]
    """(final verified speedup, seconds, error): a failure is recorded, never the end of the run."""
    from arbor.campaign.run import run_campaign

    t = time.monotonic()
    try:
        s = run_campaign(spec, lambda *a: None)
    except Exception as exc:  # noqa: BLE001 - one problem's fault must not lose the others' hours
        return None, time.monotonic() - t, f"{type(exc).__name__}: {exc}".splitlines()[0]
    return s.speedup or 1.0, time.monotonic() - t, None


def _cold_phase(tmp: Path, paths: list[Path], evaluations: int, scale: dict[str, float]) -> None:
    """Each cold run records into a knowledge store of its own, so it starts with no knowledge."""
    for p in paths:
        done = tmp / "progress" / f"cold-{p.stem}.json"
        if _load(done):
            continue
        spec = _spec(tmp, f"cold-{p.stem}", p, evaluations, scale[p.stem],
                     f"sqlite:///{tmp}/cold-{p.stem}-knowledge.db")
        final, secs, err = _campaign(spec)
        _save(done, {"final": final, "seconds": secs, "error": err, "scale": scale[p.stem]})
        print(f"cold {p.stem}: " + (f"{final:.3f}x" if err is None else f"FAILED {err}") + f" in {secs:.0f} s",
              flush=True)


def run(names: list[str] | None, evaluations: int, fixed_scale: float | None, work: Path,
        report_only: bool = False, phase: str = "all") -> dict | None:
    """The comparison (None after ``phase="cold"``, which only runs the cold campaigns)."""
    from arbor.search_tree.knowledge import KnowledgeStore

    paths = problem_paths(names)
    if len(paths) < 2 and phase != "cold":
        sys.exit("warm_start: leave-one-out needs at least two problems — widen --problems")
    scale = scales(paths, fixed_scale)
    tmp = work / (f"e{evaluations}-" + ("calibrated" if fixed_scale is None else f"s{fixed_scale}"))
    tmp.mkdir(parents=True, exist_ok=True)
    done = tmp / "progress"
    print(f"campaign stores, knowledge stores and progress in {tmp}", flush=True)
    if not report_only and phase in ("all", "cold"):
        _cold_phase(tmp, paths, evaluations, scale)
    if phase == "cold":
        return None
    run_warm = not report_only
    cold = {p.stem: _load(done / f"cold-{p.stem}.json") for p in paths}
    if run_warm and (missing := [k for k, v in cold.items() if v is None]):
        sys.exit(f"warm_start: the cold campaigns of {', '.join(missing)} have not finished — run --phase cold "
                 "for them first")
    # knowledge: every finished cold campaign in --work (the problems of a split run included)
    all_records = []
    for db in sorted(tmp.glob("cold-*-knowledge.db")):
        ks = KnowledgeStore(f"sqlite:///{db}")
        try:
            all_records += ks.records()
        finally:
            ks.close()
    rows = []
    for p in paths:
        c = cold[p.stem]
        w = _load(done / f"warm-{p.stem}.json")
        if c is None or (w is None and not run_warm):  # report-only: what has finished
            continue
        loo = f"sqlite:///{tmp}/loo-{p.stem}.db"
        cold_spec = _spec(tmp, f"cold-{p.stem}", p, evaluations, scale[p.stem], None)
        spec = _spec(tmp, f"warm-{p.stem}", p, evaluations, scale[p.stem], loo)
        if w is None:
            ks = KnowledgeStore(loo)
            try:
                if not ks.records():
                    ks.add([r for r in all_records if r.campaign != f"cold-{p.stem}"])  # the other problems only
            finally:
                ks.close()
            final, secs, err = _campaign(spec)
            w = {"final": final, "seconds": secs, "error": err}
            _save(done / f"warm-{p.stem}.json", w)
        row = {"problem": p.stem, "scale": scale[p.stem], "cold_final": c["final"], "warm_final": w["final"],
               "cold_s": round(c["seconds"], 1), "warm_s": round(w["seconds"], 1),
               "error": c["error"] or w["error"]}
        if row["error"]:
            row.update(cold_evals=None, warm_evals=None, ratio=None, worse=None, warm_priors=None)
            rows.append(row)
            print(f"{p.stem}: left out — {row['error']}", flush=True)
            continue
        cc, wc = _curve(cold_spec), _curve(spec)
        # 95% of the cold run's best on the curves' own scale (the Critic's value of each accepted
        # node): the verified final is another measurement, which the curve may never reach
        cold_best = cc[-1] if cc else 1.0
        target = REACH * cold_best if REACH * cold_best > 1.0 else None  # else the baseline reaches it
        row.update(cold_best=round(cold_best, 4), cold_evals=_reach(cc, target) if target else None,
                   warm_evals=_reach(wc, target) if target else None, warm_priors=_warm_count(spec))
        row["ratio"] = (row["warm_evals"] / row["cold_evals"]) if row["warm_evals"] and row["cold_evals"] else None
        row["worse"] = row["warm_final"] < row["cold_final"] * (1 - NOISE)
        rows.append(row)
        print(f"warm {p.stem}: {row['warm_final']:.3f}x, evals to 95% of cold best: cold {row['cold_evals']} "
              f"warm {row['warm_evals']} ({row['warm_priors']} knowledge priors)", flush=True)
    scored = [(r["ratio"] if r["ratio"] is not None else float("inf"), r["cold_evals"])  # never reached: inf
              for r in rows if not r["error"] and r["cold_evals"]]
    ratios = [x for x, _ in scored]
    searched = [x for x, cold_evals in scored if cold_evals > 1]
    median_ratio = statistics.median(ratios) if ratios else None
    return {"evaluations": evaluations, "size_scale": fixed_scale or "calibrated (eager ~20 ms)", "reach": REACH, "noise": NOISE, "rows": rows,
            "median_ratio": median_ratio, "problems_in_ratio": len(ratios),
            "median_ratio_searched": statistics.median(searched) if searched else None,
            "problems_searched": len(searched),
            "failed": [r["problem"] for r in rows if r["error"]],
            "goal_evaluations_met": median_ratio is not None and median_ratio <= GOAL_RATIO,
            "goal_final_best_met": not any(r["worse"] for r in rows),
            "note": "target: 95% of the cold run's best Critic value; problems whose cold best is below 1/0.95 "
                    "have no target (the baseline reaches it) and are left out of the ratio; a warm run that never "
                    "reached the target counts as an infinite ratio; 'searched' is the median over the problems "
                    "whose cold run needed more than one evaluation (where knowledge has something to save)"}


def _warm_count(spec) -> int:  # type: ignore[no-untyped-def]
    from arbor.search_tree import open_store

    store = open_store(spec.store_url())
    try:
        evs = store.events(store.get_campaign(spec.name).id, limit=10, kinds=["warm_start"])
        return len(evs[-1].payload.get("priors") or {}) if evs else 0
    finally:
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", help="comma-separated stems or prefixes (default: all 24)")
    ap.add_argument("--evaluations", type=int, default=12, help="evaluation budget of every campaign")
    ap.add_argument("--size-scale", type=float, default=None,
                    help="one size scale for every problem (default: the suite's calibration, eager ~20 ms)")
    ap.add_argument("--phase", choices=("all", "cold", "warm"), default="all",
                    help="cold campaigns only, warm only (needs every cold one), or both")
    ap.add_argument("--report-only", action="store_true",
                    help="tabulate the problems finished in --work without running anything")
    ap.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "results" / "warm_start_run",
                    help="stores and progress (re-running the same command resumes)")
    a = ap.parse_args()
    started = time.monotonic()
    load_before = os.getloadavg()
    data = run(a.problems.split(",") if a.problems else None, a.evaluations, a.size_scale, a.work, a.report_only,
               a.phase)
    if data is None:
        print("cold phase done: run --phase warm (with the same --work) for the comparison")
        return
    data["load_avg_before"] = [round(x, 2) for x in load_before]
    data["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    print(table(data["rows"], [("problem", "problem"), ("cold_evals", "cold evals"), ("warm_evals", "warm evals"),
                               ("ratio", "warm/cold"), ("cold_best", "cold Critic best"), ("cold_final", "cold best"), ("warm_final", "warm best"),
                               ("warm_priors", "knowledge priors")]))
    print(f"median warm/cold evaluations: {data['median_ratio']} over {data['problems_in_ratio']} problems (goal <= {GOAL_RATIO}: "
          f"{'met' if data['goal_evaluations_met'] else 'NOT met'}); final best never worse beyond "
          f"{NOISE:.0%}: {'met' if data['goal_final_best_met'] else 'NOT met'}; load {data['load_avg_before']}")
    print(f"median warm/cold over the {data['problems_searched']} problems whose cold run needed more than one "
          f"evaluation: {data['median_ratio_searched']}")
    print(f"wrote {write_result('warm_start', data, started)}")


if __name__ == "__main__":
    main()

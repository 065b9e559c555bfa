"""Warm start, leave-one-out over the development problem set (benchmarks/problems/).

For each problem: a cold campaign (skill priors only), then a warm campaign whose knowledge store
holds the records of every *other* problem's cold campaign (never its own). Reported per problem:
evaluations until the best reached 95% of the cold run's final best, for cold and warm, and the
final (verified) best of each. Goals: warm needs <= 0.5x the evaluations of cold (median over the
problems whose cold run needed at least 3 evaluations to its target — where a warm start has room
to show anything — with at least 8 such problems), and the warm final best is never worse than
the cold one beyond the noise (NOISE).
Both are judged on a re-measurement (``--phase remeasure``, benchmarks/remeasure.py): the two
campaigns of a problem ran an hour apart, so every candidate either accepted, and both finals, are
measured again one after the other; each run's own Critic figures are printed beside them. Two
different finals get more rounds than the curves (``--final-rounds``, FINAL_ROUNDS in
warm_start_compare.py: at 3 rounds the judge itself called equal finals "worse" too often to test
"never worse"), and the report prints the judge's own false "worse" rate from the run's noise.
``--phase finals --rounds N`` measures only the two finals of the named problems again, with more
rounds (a second look at a "worse" final; written to warm_start_finals.json, never into the table).
The report also prints the floor of the median: what it would be if every warm run reached the
target at its first evaluation — a problem the cold run solved at evaluation 1 can only tie —
and, per problem, how many recipes the warm start offered and at which evaluations the warm run
measured one (agents/knowledge/recipes.py).

Sizes: each problem at the scale the generalization suite calibrated for it (eager about 20 ms on
this machine, benchmarks/results/generalization_run/calibration.json), so the campaigns meet the
problems the suite measures; ``--size-scale`` forces one scale for all (at 0.25 most problems take
microseconds and nothing beats eager: a warm start has nothing to find).

Real kernel campaigns, so this is slow on a shared 2-core box: ``--problems`` picks a subset
(file stems or prefixes), ``--evaluations`` the budget of each campaign. Resumable: stores and
per-campaign progress files live in ``--work`` (default benchmarks/results/warm_start_run);
re-running the same command skips the campaigns already finished. ``--phase cold``, ``--phase
warm`` and ``--phase remeasure`` split the run, so two processes can share it with the same load in
each phase (the warm phase takes its knowledge from every cold campaign in ``--work``); then
``--report-only`` prints the table. A problem whose
campaign fails is a row with its error, not the end of the run.

    python -m benchmarks.warm_start --problems l1_04_swish,l1_01_relu,l2_10 --evaluations 6
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from benchmarks.common import ROOT, fmt, table, write_result
from benchmarks.remeasure import EAGER, Remeasured, measure_side_by_side
from benchmarks.warm_start_compare import (
    FINAL_ROUNDS,
    GOAL_RATIO,
    MIN_COLD,
    MIN_PROBLEMS,
    NOISE,
    REACH,
    compare_row,
    false_worse,
    final_ratio,
    goal_met,
    median_floor,
    medians,
    residuals,
)
from benchmarks.warm_start_work import (
    _finished_pair,
    _load,
    _save,
    _spec,
    _work_dir,
    problem_paths,
    scales,
)

ROUNDS = 3  # side-by-side re-measurement rounds per problem (--rounds)


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


def _warm_phase(tmp: Path, paths: list[Path], evaluations: int, scale: dict[str, float]) -> None:
    """Each warm run's knowledge store holds every finished cold campaign's records in --work (the
    problems of a split run included) except its own problem's."""
    from arbor.search_tree.knowledge import KnowledgeStore

    done = tmp / "progress"
    if missing := [p.stem for p in paths if _load(done / f"cold-{p.stem}.json") is None]:
        sys.exit(f"warm_start: the cold campaigns of {', '.join(missing)} have not finished — run --phase cold "
                 "for them first")
    all_records = []
    for db in sorted(tmp.glob("cold-*-knowledge.db")):
        ks = KnowledgeStore(f"sqlite:///{db}")
        try:
            all_records += ks.records()
        finally:
            ks.close()
    for p in paths:
        if _load(done / f"warm-{p.stem}.json"):
            continue
        loo = f"sqlite:///{tmp}/loo-{p.stem}.db"
        ks = KnowledgeStore(loo)
        try:
            if not ks.records():
                ks.add([r for r in all_records if r.campaign != f"cold-{p.stem}"])  # the other problems only
        finally:
            ks.close()
        final, secs, err = _campaign(_spec(tmp, f"warm-{p.stem}", p, evaluations, scale[p.stem], loo))
        _save(done / f"warm-{p.stem}.json", {"final": final, "seconds": secs, "error": err})
        print(f"warm {p.stem}: " + (f"{final:.3f}x" if err is None else f"FAILED {err}") + f" in {secs:.0f} s",
              flush=True)


def _remeasure_phase(tmp: Path, paths: list[Path], evaluations: int, scale: dict[str, float],
                     rounds: int = ROUNDS, final_rounds: int = FINAL_ROUNDS) -> None:
    """Every candidate either campaign of a problem accepted, and both final bests, measured again
    side by side (benchmarks/remeasure.py): the cold and warm runs of a problem ran an hour apart.
    Two different finals are then measured until each has ``final_rounds`` rounds: the "worse"
    judgement needs more precision than the curves (FINAL_ROUNDS)."""
    done = tmp / "progress"
    for p in paths:
        t = time.monotonic()
        pair = None if _load(done / f"remeasure-{p.stem}.json") else _finished_pair(tmp, p, evaluations, scale[p.stem])
        if pair is None:
            continue
        cold_spec, (ck, ccrit, csrc, cfinal), (wk, wcrit, wsrc, wfinal) = pair
        sources = {**csrc, **wsrc}
        rm = measure_side_by_side(cold_spec, sources, rounds) if sources else Remeasured()
        finals = {k: sources[k] for k in dict.fromkeys((cfinal, wfinal)) if k} if cfinal != wfinal else {}
        extra = max(0, final_rounds - rounds) if finals else 0
        if extra:  # the judge of "worse" gets its own precision (FINAL_ROUNDS)
            rm.extend(measure_side_by_side(cold_spec, finals, extra))
        _save(done / f"remeasure-{p.stem}.json",
              {"cold": {"evaluations": ck, "critic": ccrit, "final": cfinal},
               "warm": {"evaluations": wk, "critic": wcrit, "final": wfinal},
               "remeasured": rm.to_json(), "rounds": rounds, "final_rounds": rounds + extra,
               "seconds": round(time.monotonic() - t, 1)})
        print(f"remeasured {p.stem}: {len(sources)} candidates x {rounds} rounds"
              + (f", the two finals {extra} more" if extra else "") + f" in {time.monotonic() - t:.0f} s", flush=True)


def _finals_phase(tmp: Path, paths: list[Path], evaluations: int, scale: dict[str, float],
                  rounds: int) -> dict:
    """The cold and warm final bests alone, measured again side by side with ``rounds`` rounds: a
    second look at a "worse" final of the table, whose re-measurement may have had one round. It
    never replaces the table's numbers; its result is written beside them."""
    out = {}
    for p in paths:
        pair = _finished_pair(tmp, p, evaluations, scale[p.stem])
        if pair is None:
            continue
        cold_spec, (_, _, csrc, cfinal), (_, _, wsrc, wfinal) = pair
        src = {**csrc, **wsrc}
        rm = measure_side_by_side(cold_spec, {k: src[k] for k in (cfinal, wfinal) if k}, rounds)
        fr = final_ratio(rm, cfinal, wfinal)
        out[p.stem] = {"final_ratio": fr, "worse": fr is not None and fr < 1 - NOISE, "rounds": rounds,
                       "cold_final": cfinal, "warm_final": wfinal, "remeasured": rm.to_json()}
        print(f"{p.stem}: warm/cold final {fmt(fr, 3)} over {rounds} rounds (eager control "
              f"{[round(x, 3) for x in rm.values.get(EAGER, [])]})", flush=True)
    return out


def run(names: list[str] | None, evaluations: int, fixed_scale: float | None, work: Path,
        report_only: bool = False, phase: str = "all", rounds: int = ROUNDS,
        final_rounds: int = FINAL_ROUNDS) -> dict | None:
    """The comparison (None after a phase other than "all", which only runs its campaigns)."""
    paths = problem_paths(names)
    if len(paths) < 2 and phase != "cold":
        sys.exit("warm_start: leave-one-out needs at least two problems — widen --problems")
    scale = scales(paths, fixed_scale)
    tmp = _work_dir(work, evaluations, fixed_scale)
    tmp.mkdir(parents=True, exist_ok=True)
    done = tmp / "progress"
    print(f"campaign stores, knowledge stores and progress in {tmp}", flush=True)
    if not report_only:
        for name, step in (("cold", _cold_phase), ("warm", _warm_phase)):
            if phase in ("all", name):
                step(tmp, paths, evaluations, scale)
        if phase in ("all", "remeasure"):
            _remeasure_phase(tmp, paths, evaluations, scale, rounds, final_rounds)
        if phase != "all":
            return None
    rows, noise = [], []
    for p in paths:
        c, w = _load(done / f"cold-{p.stem}.json"), _load(done / f"warm-{p.stem}.json")
        if c is None or w is None:  # report-only: what has finished
            continue
        r = _load(done / f"remeasure-{p.stem}.json")
        if r is not None:
            noise += residuals([Remeasured.from_json(r["remeasured"])])
        warm_spec = _spec(tmp, f"warm-{p.stem}", p, evaluations, scale[p.stem], None)
        info = _warm_info(warm_spec) if not w["error"] else {"priors": 0, "recipes": 0, "recipe_evaluations": []}
        row = compare_row(p, scale[p.stem], c, w, r, info["priors"])
        row.update(warm_recipes=info["recipes"], recipe_evaluations=info["recipe_evaluations"],
                   final_rounds=(r or {}).get("final_rounds", (r or {}).get("rounds")))
        rows.append(row)
        if row["error"]:
            print(f"{p.stem}: left out — {row['error']}", flush=True)
    median_ratio, n, median_searched, n_searched = medians(rows, "cold_evals", "warm_evals")
    critic_median, critic_n, critic_searched, critic_n_searched = medians(rows, "critic_cold_evals",
                                                                           "critic_warm_evals")
    # how often this run's judge calls equal finals "worse", from its own round-to-round noise
    judged_finals = [row for row in rows if not row["error"] and row.get("final_ratio") is not None
                     and not row.get("same_final")]
    p_false = {n: false_worse(noise, n) for n in {row["final_rounds"] for row in judged_finals if row["final_rounds"]}}
    expected_false = sum(p_false.get(row["final_rounds"]) or 0.0 for row in judged_finals)
    return {"evaluations": evaluations, "size_scale": fixed_scale or "calibrated (eager ~20 ms)", "reach": REACH,
            "noise": NOISE, "rows": rows,
            "rounds": sorted({(_load(done / f"remeasure-{r['problem']}.json") or {}).get("rounds") for r in rows} - {None}),
            "median_ratio": median_ratio, "problems_in_ratio": n,
            "median_ratio_searched": median_searched, "problems_searched": n_searched,
            "median_ratio_floor": median_floor(rows, "cold_evals"),
            "critic_median_ratio": critic_median, "critic_problems_in_ratio": critic_n,
            "critic_median_ratio_searched": critic_searched, "critic_problems_searched": critic_n_searched,
            "failed": [r["problem"] for r in rows if r["error"]],
            "different_finals": len(judged_finals), "noise_residuals": len(noise),
            "false_worse_per_problem": {str(k): None if v is None else round(v, 4) for k, v in p_false.items()},
            "expected_false_worse": round(expected_false, 3),
            "min_cold_evaluations": MIN_COLD, "min_problems": MIN_PROBLEMS,
            "enough_problems": n_searched >= MIN_PROBLEMS,
            "goal_evaluations_met": goal_met(median_searched, n_searched),
            "goal_final_best_met": not any(r["worse"] for r in rows) and not any(r["error"] for r in rows),
            "note": "every candidate either run accepted, and both final bests, re-measured side by side "
                    "(--rounds rounds, each measurement a fresh harness process as in a campaign, order alternated): the curves, the 95% target "
                    "and 'worse' (warm final / cold final, paired per round, below 1 - noise) are on that "
                    "scale; a candidate the Critic rejected never counts. critic_*: the same on each run's own "
                    "Critic values. Problems whose cold best is below 1/0.95 have no target and are left out "
                    "of the ratio; a warm run that never reached the target counts as an infinite ratio; "
                    "'searched': the problems whose cold run needed at least min_cold_evaluations (the goal is "
                    "judged on them, with at least min_problems of them); eager_spread: "
                    "the reference re-measured as a candidate, its largest distance from 1.0 (the noise left)"}


def _warm_info(spec) -> dict:  # type: ignore[no-untyped-def]
    """What the warm campaign got from the knowledge store (move priors, recipes) and which of its
    evaluations (1-based) measured a recipe."""
    from arbor.agents.knowledge.recipes import PREFIX
    from arbor.search_tree import open_store

    store = open_store(spec.store_url())
    try:
        cid = store.get_campaign(spec.name).id
        evs = store.events(cid, limit=10, kinds=["warm_start"])
        payload = evs[-1].payload if evs else {}
        nodes = sorted((n for n in store.nodes(cid) if n.parent_id is not None), key=lambda n: n.id)
        return {"priors": len(payload.get("priors") or {}), "recipes": len(payload.get("recipes") or []),
                "recipe_evaluations": [i for i, n in enumerate(nodes, 1) if (n.move_id or "").startswith(PREFIX)]}
    finally:
        store.close()


def _display(row: dict) -> dict:
    """Table cells: ratios to two decimals, bests to three figures, the eager noise in percent."""
    def f(x, spec):  # type: ignore[no-untyped-def]
        return "-" if x is None else format(x, spec)

    return {**row, "ratio": f(row.get("ratio"), ".2f"), "cold_best": f(row.get("cold_best"), ".3g"),
            "warm_best": f(row.get("warm_best"), ".3g"), "final_ratio": f(row.get("final_ratio"), ".3f"),
            "eager_spread": "-" if row.get("eager_spread") is None else f"±{row['eager_spread']:.1%}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", help="comma-separated stems or prefixes (default: every problem of benchmarks/problems)")
    ap.add_argument("--evaluations", type=int, default=12, help="evaluation budget of every campaign")
    ap.add_argument("--size-scale", type=float, default=None,
                    help="one size scale for every problem (default: the suite's calibration, eager ~20 ms)")
    ap.add_argument("--phase", choices=("all", "cold", "warm", "remeasure", "finals"), default="all",
                    help="cold campaigns only, warm only (needs every cold one), the side-by-side "
                         "re-measurement only (needs both), or all three and the table; finals: "
                         "the --problems' two final bests again with --rounds rounds, written to "
                         "warm_start_finals.json (a second look at a 'worse' final)")
    ap.add_argument("--rounds", type=int, default=ROUNDS, help="side-by-side re-measurement rounds")
    ap.add_argument("--final-rounds", type=int, default=FINAL_ROUNDS,
                    help="rounds for two different final bests (the 'worse' judgement), counting --rounds")
    ap.add_argument("--report-only", action="store_true",
                    help="tabulate the problems finished in --work without running anything")
    ap.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "results" / "warm_start_run",
                    help="stores and progress (re-running the same command resumes)")
    a = ap.parse_args()
    started = time.monotonic()
    if a.phase == "finals":
        paths = problem_paths(a.problems.split(",") if a.problems else None)
        out = _finals_phase(_work_dir(a.work, a.evaluations, a.size_scale), paths, a.evaluations, scales(paths, a.size_scale), a.rounds)
        print(f"wrote {write_result('warm_start_finals', {'evaluations': a.evaluations, 'noise': NOISE, 'problems': out}, started)}")
        return
    load_before = os.getloadavg()
    data = run(a.problems.split(",") if a.problems else None, a.evaluations, a.size_scale, a.work, a.report_only,
               a.phase, a.rounds, a.final_rounds)
    if data is None:
        nxt = {"cold": "--phase warm", "warm": "--phase remeasure", "remeasure": "--report-only"}[a.phase]
        print(f"{a.phase} phase done: run {nxt} (with the same --work) next")
        return
    data["load_avg_before"] = [round(x, 2) for x in load_before]
    data["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    print(table([_display(r) for r in data["rows"]], [("problem", "problem"), ("cold_evals", "cold evals"), ("warm_evals", "warm evals"),
                               ("ratio", "warm/cold"), ("critic_cold_evals", "cold (Critic)"),
                               ("critic_warm_evals", "warm (Critic)"), ("cold_best", "cold best"),
                               ("warm_best", "warm best"), ("final_ratio", "warm/cold final"),
                               ("eager_spread", "eager noise"), ("warm_priors", "knowledge priors"),
                               ("warm_recipes", "recipes"), ("recipe_evaluations", "recipe evals")]))
    judged = data["problems_searched"]
    short = "" if data["enough_problems"] else f"; only {judged} such problems, {MIN_PROBLEMS} needed"
    print(f"median warm/cold evaluations (re-measured side by side) over the {judged} problems whose cold "
          f"run needed >= {MIN_COLD} evaluations: {data['median_ratio_searched']} (goal <= {GOAL_RATIO}: "
          f"{'met' if data['goal_evaluations_met'] else 'NOT met'}{short}); over all {data['problems_in_ratio']} "
          f"with a target: {data['median_ratio']}; final best never worse beyond {NOISE:.0%}: "
          f"{'met' if data['goal_final_best_met'] else 'NOT met'}; load {data['load_avg_before']}")
    print(f"the judge: {data['different_finals']} problems with different finals; equal finals would read "
          f"'worse' with probability {data['false_worse_per_problem']} (by rounds, from {data['noise_residuals']} "
          f"residuals of this run), {data['expected_false_worse']} such false 'worse' expected over these problems")
    print(f"the lowest median any warm start could reach here (warm at its first evaluation everywhere): "
          f"{data['median_ratio_floor']}", flush=True)
    print(f"on each run's own Critic values: "
          f"{data['critic_median_ratio']} ({data['critic_problems_in_ratio']} problems), "
          f"{data['critic_median_ratio_searched']} ({data['critic_problems_searched']} searched)")
    print(f"wrote {write_result('warm_start', data, started)}")


if __name__ == "__main__":
    main()

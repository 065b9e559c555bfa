"""Generalization: the default heuristic agents on problems nobody tuned them for.

Runs ``arbor suite`` on the development set in ``benchmarks/problems`` (KernelBench format, CPU,
one thread, 12 evaluations per problem, sizes scaled so the eager reference takes ~20 ms) and
prints the side-by-side table: Arbor's verified best vs eager and vs ``torch.compile`` default,
fast_p and geomeans — also without the wins that come from an algebraic collapse
(``arbor/suite/collapse.py``) — and, per problem, the evaluations spent on a move family after its
first member regressed by more than 10% (``benchmarks/family_waste.py``). Goals: geomean >= 1.3x
vs eager and >= 1.1x vs best-of(eager, compile) (the latter also without collapses), fast_1.1 >=
50%, >= 90% ending with a correct, Critic-verified result, none slower than eager; with
``--before DIR`` (the same suite run by the code before a change), evaluations after a family's
first regression fall by >= 60%.

    python -m benchmarks.generalization                  # the whole set (~2-3 h on 2 cores)
    python -m benchmarks.generalization --levels 2 --ids 1,2,3   # a subset
    python -m benchmarks.generalization --out benchmarks/results/gen_before   # on the code before
    python -m benchmarks.generalization --out benchmarks/results/gen_before --no-family-posterior  # or: the mechanism off
    python -m benchmarks.generalization --out benchmarks/results/gen_after --before benchmarks/results/gen_before
Resumable: results accumulate in --out (default benchmarks/results/generalization_run). Split over
processes: each its own ``--ids``/``--levels`` and ``--out``, then ``--report-only --merge DIR``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from benchmarks.common import ROOT, table, write_result

# "result_fraction": problems that end with a correct, Critic-verified result — a verified win, or
# the reference kept because nothing beat it (a campaign that failed or never started does not
# count); the share of verified wins is printed beside it.
GOALS = {"geomean_vs_eager": 1.3, "geomean_vs_best_of": 1.1, "geomean_vs_best_of_no_collapse": 1.1,
         "fast_1.1": 0.5, "result_fraction": 0.9}


def annotate(rows: list[dict], folder: Path) -> list[dict]:
    """Rows of one result folder, with what its store says: the collapse marks and the reference's
    speed-of-light position of rows that lack them (an older run) and each problem's evaluations
    after a family's first regression."""
    from arbor.suite.collapse import mark, suite_store_url
    from arbor.suite.headroom import fill

    from benchmarks.family_waste import suite_waste

    url = suite_store_url(folder)
    mark(rows, url)
    fill(rows, url)
    if url:
        waste = suite_waste(url, rows)
        for r in rows:
            if r["key"] in waste:
                r["family_waste"] = waste[r["key"]]
    return rows


def waste_of(folder: Path) -> dict[str, dict]:
    """Per problem of a finished suite folder: its family waste (``family_waste.py``)."""
    import json

    rows = json.loads((folder / "suite_results.json").read_text())["rows"]
    return {r["key"]: r["family_waste"] for r in annotate(rows, folder) if "family_waste" in r}


def tabulate(out: Path, extra: list[Path] | None = None) -> dict:
    """The table over every problem finished so far in ``out`` (runs done in several sittings), with
    the rows of ``extra`` result folders merged in (a suite split over processes: ``--ids`` each,
    its own ``--out``); the report page is written again over all of them."""
    import json

    from arbor.suite.page import write_page
    from arbor.suite.table import markdown, summary

    data = json.loads((out / "suite_results.json").read_text())
    rows = {r["key"]: r for r in annotate(data["rows"], out)}
    for d in extra or []:
        for r in annotate(json.loads((d / "suite_results.json").read_text())["rows"], d):
            rows.setdefault(r["key"], r)
    rows = sorted(rows.values(), key=lambda r: r["key"])
    summ = summary(rows)
    meta = {**data.get("meta", {}), "merged_from": [str(out), *map(str, extra or [])]}
    write_page(out, rows, summ, meta)
    return {"rows": rows, "summary": summ, "table": markdown(rows, summ), "meta": meta}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=ROOT / "benchmarks" / "problems")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "generalization_run")
    ap.add_argument("--ids", default=None)
    ap.add_argument("--levels", default=None)
    ap.add_argument("--budget", type=int, default=12)
    ap.add_argument("--time-target-ms", type=float, default=20.0)
    ap.add_argument("--max-cv", type=float, default=0.15)
    ap.add_argument("--max-wall-s", type=float, default=None,
                    help="wall-clock budget of each campaign (default: the suite's, 60 s + 75 s an evaluation)")
    ap.add_argument("--no-family-posterior", action="store_true",
                    help="run the campaigns with agents.family_posterior false: the 'before' of --before "
                         "for the family posterior alone (same code, the mechanism switched off)")
    ap.add_argument("--report-only", action="store_true",
                    help="tabulate every finished problem in --out without running anything")
    ap.add_argument("--merge", type=Path, action="append", default=[],
                    help="with --report-only: also the rows of this result folder (repeatable)")
    ap.add_argument("--before", type=Path, action="append", default=[],
                    help="a result folder of the same suite run by the code before a change (repeatable: "
                         "merged): prints evaluations spent after a family's first regression, before vs after")
    args = ap.parse_args(argv)
    from arbor.suite.run import SuiteOptions, run_suite

    ints = (lambda s: [int(x) for x in s.split(",")] if s else None)
    started = time.monotonic()
    load0 = os.getloadavg()
    if args.report_only:
        result = tabulate(args.out, args.merge)
    else:
        run_suite(SuiteOptions(directory=args.dir, out=args.out, ids=ints(args.ids),
                               levels=ints(args.levels), budget=args.budget,
                               time_target_ms=args.time_target_ms, max_cv=args.max_cv,
                               max_wall_s=args.max_wall_s, family_posterior=not args.no_family_posterior))
        result = tabulate(args.out)  # with the store's annotations (collapses, family waste)
    summ = result["summary"]
    print(result["table"])
    waste = {r["key"]: r["family_waste"] for r in result["rows"] if "family_waste" in r}
    summ["family_waste_total"] = sum(w["total"] for w in waste.values())
    spent = ", ".join(f"{k} {w['total']}" for k, w in waste.items() if w["total"]) or "none"
    print(f"evaluations spent on a family after its first member regressed by > 10%: "
          f"{summ['family_waste_total']} over {len(waste)} problems ({spent})")
    comparison = None
    if args.before:
        from benchmarks.family_waste import compare

        before: dict = {}
        for d in args.before:
            for k, w in waste_of(d).items():
                before.setdefault(k, w)
        comparison = compare(before, waste)
        print(table(comparison["rows"], [("problem", "problem"), ("before", "before"), ("after", "after"),
                                         ("same_parent_before", "same parent before"),
                                         ("same_parent_after", "same parent after"),
                                         ("families_before", "families before"), ("families_after", "families after")]))
        fall = comparison["fall"]
        print(f"after a family's first regression: {comparison['before_total']} evaluations before, "
              f"{comparison['after_total']} after ({'-' if fall is None else f'{fall:.0%}'} fewer; goal >= "
              f"{comparison['goal']:.0%}: {'met' if comparison['met'] else 'NOT met'})")
        if comparison.get("same_parent_fall") is not None:
            print(f"  of them below a parent where the family had regressed: {comparison['same_parent_before']} "
                  f"before, {comparison['same_parent_after']} after ({comparison['same_parent_fall']:.0%} fewer); "
                  f"verified wins among the counted: {comparison['wins_before']} before, "
                  f"{comparison['wins_after']} after")
    met = {k: (summ.get(k) or 0) >= v for k, v in GOALS.items()}
    met["none_slower_than_eager"] = summ["slower_than_eager"] == 0
    if summ.get("collapse_unknown"):  # rows whose move path no store can tell: not judged
        met["geomean_vs_best_of_no_collapse"] = None
    if comparison is not None:
        met["family_waste_fall"] = comparison["met"]
    print("goals: " + ", ".join(f"{k} {'unknown' if ok is None else 'met' if ok else 'NOT met'}"
                                for k, ok in met.items()))
    print(f"load average at start {[round(x, 2) for x in load0]}, at end {[round(x, 2) for x in os.getloadavg()]}")
    path = write_result("generalization", {"summary": summ, "goals": met, "rows": result["rows"],
                                           "family_waste_compare": comparison,
                                           "meta": result["meta"], "load_avg_end": os.getloadavg(),
                                           "args": {k: str(v) for k, v in vars(args).items()}}, started)
    print(f"written {path}")
    return result


if __name__ == "__main__":
    main()

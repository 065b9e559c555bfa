"""Generalization: the default heuristic agents on problems nobody tuned them for.

Runs ``arbor suite`` on the development set in ``benchmarks/problems`` (KernelBench format, CPU,
one thread, 12 evaluations per problem, sizes scaled so the eager reference takes ~20 ms) and
prints the side-by-side table: Arbor's verified best vs eager and vs ``torch.compile`` default,
fast_p and geomeans. Goals: geomean >= 1.3x vs eager and >= 1.1x vs best-of(eager, compile),
fast_1.1 >= 50%, >= 90% ending with a correct, Critic-verified result, none slower than eager.

    python -m benchmarks.generalization                  # the whole set (~1-2 h on 2 cores)
    python -m benchmarks.generalization --levels 2 --ids 1,2,3   # a subset
Resumable: results accumulate in --out (default benchmarks/results/generalization_run). Split over
processes: each its own ``--ids``/``--levels`` and ``--out``, then ``--report-only --merge DIR``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from benchmarks.common import ROOT, write_result

# "result_fraction": problems that end with a correct, Critic-verified result — a verified win, or
# the reference kept because nothing beat it (a campaign that failed or never started does not
# count); the share of verified wins is printed beside it.
GOALS = {"geomean_vs_eager": 1.3, "geomean_vs_best_of": 1.1, "fast_1.1": 0.5, "result_fraction": 0.9}


def tabulate(out: Path, extra: list[Path] | None = None) -> dict:
    """The table over every problem finished so far in ``out`` (runs done in several sittings), with
    the rows of ``extra`` result folders merged in (a suite split over processes: ``--ids`` each,
    its own ``--out``); the report page is written again over all of them."""
    import json

    from arbor.suite.page import write_page
    from arbor.suite.table import markdown, summary

    data = json.loads((out / "suite_results.json").read_text())
    rows = {r["key"]: r for r in data["rows"]}
    for d in extra or []:
        for r in json.loads((d / "suite_results.json").read_text())["rows"]:
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
    ap.add_argument("--report-only", action="store_true",
                    help="tabulate every finished problem in --out without running anything")
    ap.add_argument("--merge", type=Path, action="append", default=[],
                    help="with --report-only: also the rows of this result folder (repeatable)")
    args = ap.parse_args(argv)
    from arbor.suite.run import SuiteOptions, run_suite

    ints = (lambda s: [int(x) for x in s.split(",")] if s else None)
    started = time.monotonic()
    load0 = os.getloadavg()
    if args.report_only:
        result = tabulate(args.out, args.merge)
    else:
        result = run_suite(SuiteOptions(directory=args.dir, out=args.out, ids=ints(args.ids),
                                        levels=ints(args.levels), budget=args.budget,
                                        time_target_ms=args.time_target_ms, max_cv=args.max_cv))
    summ = result["summary"]
    print(result["table"])
    met = {k: (summ.get(k) or 0) >= v for k, v in GOALS.items()}
    met["none_slower_than_eager"] = summ["slower_than_eager"] == 0
    print("goals: " + ", ".join(f"{k} {'met' if ok else 'NOT met'}" for k, ok in met.items()))
    print(f"load average at start {[round(x, 2) for x in load0]}, at end {[round(x, 2) for x in os.getloadavg()]}")
    path = write_result("generalization", {"summary": summ, "goals": met, "rows": result["rows"],
                                           "meta": result["meta"], "load_avg_end": os.getloadavg(),
                                           "args": {k: str(v) for k, v in vars(args).items()}}, started)
    print(f"written {path}")
    return result


if __name__ == "__main__":
    main()

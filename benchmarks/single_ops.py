"""Single ops and normalizations against their speed of light: eager, torch.compile and Arbor.

Runs ``arbor suite`` (calibration, one campaign a problem, the eager/compile/Arbor comparison in one
harness job: ``arbor/suite/``) over the development set's single ops and normalizations
(``benchmarks/problems/l1_*``: ``DEV_IDS``) and the ones written for this benchmark
(``benchmarks/problems_single_ops/``: exact-erf GELU, RMSNorm, mean, sigmoid), then, apart, over
held-out problems nobody tuned for (``benchmarks/problems_single_heldout/``). Each row gives every
side's fraction of the reference's speed of light (``arbor/campaign/speed_of_light.py``: the
memory or the compute bound, which one binds), and its campaign's stop reason and the wall budget
it used. Judged (``single_ops_table.py``) over the problems whose reference is more than 1.3x from
its speed of light: Arbor >= 1.3x the best of eager and compile (geomean), >= 50% of the speed of
light on each memory-bound one, and no campaign stopping ``exhausted`` with > 30% of its wall budget
left while its speed of light shows > 1.3x.

    python -m benchmarks.single_ops                        # the whole set (~30-40 min on 2 cores)
    python -m benchmarks.single_ops --ids relu,gelu_erf --budget 2   # a subset (ids, or parts of names)
    python -m benchmarks.single_ops --report-only          # the table of what --out holds

Resumable: the suites' results accumulate in --out (default benchmarks/results/single_ops_run);
writes ``benchmarks/results/single_ops.json`` with the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from benchmarks.common import ROOT, write_result
from benchmarks.single_ops_table import judge, markdown, summarize

PROBLEMS = ROOT / "benchmarks"
# benchmarks/problems' single ops and normalizations: relu, tanh-GELU, sum, swish, layernorm,
# softmax, hand-written RMSNorm, hardtanh+leaky, ELU, softsign, log-softmax, hand-written layernorm
DEV_IDS = (1, 2, 3, 4, 5, 6, 7, 12, 13, 18, 19, 20)
SETS = {  # name -> (folder, the ids taken from it: None for all)
    "development": [(PROBLEMS / "problems", DEV_IDS), (PROBLEMS / "problems_single_ops", None)],
    "held_out": [(PROBLEMS / "problems_single_heldout", None)],
}
DEFAULT_BUDGET = 3  # evaluations a campaign: ~19 problems in 30-40 minutes on 2 cores
DEFAULT_WALL_S = 90.0


def _select(folder: Path, ids: tuple | None, tokens: list[str] | None) -> list[int] | None:
    """The level-1 problem ids of ``folder`` to run (level 2 reuses the numbers): ``ids`` (None:
    all), narrowed to those whose id or name matches one of ``tokens``; [] when none does."""
    from arbor.suite.discover import discover

    entries = [e for e in discover(folder, levels=[1]) if ids is None or e.pid in ids]
    if tokens:  # a number is an id, anything else a part of a name
        entries = [e for e in entries if any(t == str(e.pid) if t.isdigit() else t in e.key for t in tokens)]
    return [e.pid for e in entries if e.pid is not None]


def run_set(name: str, out: Path, args, say=print) -> list[dict]:  # type: ignore[no-untyped-def]
    """Run (or resume) one set's suites into ``out/name``; its rows, in folder order."""
    from arbor.suite.run import SuiteOptions, run_suite

    rows: list[dict] = []
    for folder, ids in SETS[name]:
        chosen = _select(folder, ids, args.ids)
        if not chosen:
            continue
        result = run_suite(SuiteOptions(directory=folder, out=out / name, ids=chosen, levels=[1], budget=args.budget,
                                        time_target_ms=args.time_target_ms, max_wall_s=args.max_wall_s,
                                        max_cv=args.max_cv), say)
        rows += result["rows"]
    return rows


def read_set(name: str, out: Path) -> list[dict]:
    """The rows a set's suite folder holds (--report-only)."""
    from arbor.suite.collapse import suite_store_url
    from arbor.suite.headroom import fill

    path = out / name / "suite_results.json"
    if not path.is_file():
        return []
    rows = json.loads(path.read_text()).get("rows", [])
    url = suite_store_url(out / name)
    if url:  # read the positions again, with this code's speed of light
        rows = [{k: v for k, v in r.items() if k != "speed_of_light"} for r in rows]
    return fill(rows, url)


def _read_meta(folder: Path) -> dict | None:
    try:
        return json.loads((folder / "suite_results.json").read_text()).get("meta")
    except (OSError, ValueError):
        return None


def report(sets: dict[str, list[dict]], wall_s: float) -> dict:
    """Judged rows and summaries per set, and the tables."""
    out: dict = {"sets": {}, "tables": []}
    for name, rows in sets.items():
        judged = [judge(r, wall_s) for r in rows]
        summ = summarize(judged)
        out["sets"][name] = {"rows": judged, "summary": summ}
        out["tables"].append(markdown(judged, summ, name.replace("_", "-")))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "single_ops_run")
    ap.add_argument("--ids", type=lambda s: [t.strip() for t in s.split(",") if t.strip()], default=None,
                    help="problem ids or parts of names, comma-separated (default: every problem)")
    ap.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="evaluations a campaign")
    ap.add_argument("--max-wall-s", type=float, default=DEFAULT_WALL_S, help="wall-clock budget a campaign")
    ap.add_argument("--time-target-ms", type=float, default=10.0, help="the calibrated reference time")
    ap.add_argument("--max-cv", type=float, default=0.15)
    ap.add_argument("--sets", default="development,held_out")
    ap.add_argument("--report-only", action="store_true", help="tabulate what --out holds, run nothing")
    ap.add_argument("--result", default="single_ops", help="name of the JSON under benchmarks/results")
    args = ap.parse_args(argv)
    names = [s for s in args.sets.split(",") if s]
    bad = [s for s in names if s not in SETS]
    if bad or args.budget < 1 or args.max_wall_s <= 0:
        print(f"single_ops: {'unknown set ' + ', '.join(bad) if bad else 'budget and wall must be positive'} "
              f"(sets: {', '.join(SETS)}; --budget >= 1, --max-wall-s > 0)", file=sys.stderr)
        return 2
    started, load0 = time.monotonic(), os.getloadavg()
    sets = {n: read_set(n, args.out) if args.report_only else run_set(n, args.out, args) for n in names}
    result = report(sets, args.max_wall_s)
    result["suite_meta"] = {n: _read_meta(args.out / n) for n in names}  # each suite's load when it ran
    for t in result["tables"]:
        print(t + "\n")
    load1 = os.getloadavg()
    print(f"load average at start {[round(x, 2) for x in load0]}, at end {[round(x, 2) for x in load1]}")
    path = write_result(args.result, {**result, "load_avg_end": [round(x, 2) for x in load1],
                                      "args": {k: str(v) for k, v in vars(args).items()}}, started)
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

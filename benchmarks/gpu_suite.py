"""The GPU development set end to end: generated kernels checked, then ``arbor suite`` on one GPU.

``scripts/gpu_suite.sh`` runs this unattended on a GPU host. Two steps, one budget:

1. every ``triton_codegen`` kernel of the set against the reference on the device (which problems
   get one, correct or not, eager vs kernel time) — ``benchmarks/triton_kernels.py``;
2. ``arbor suite`` (calibrate, campaign, compare, table) on the set at the files' own GPU sizes,
   the per-problem wall budget cut so the whole run ends within ``--total-s`` (default 450 s: the
   8 minutes of the issue less the install). The table is the CPU suite's: eager, compile,
   verified best, vs best-of(eager, compile).

``ARBOR_GPU_SUITE_DRY=1`` is the CPU dry run: the same problems at a tiny size on the CPU, a
budget of one candidate chosen among the generated Triton kernels (run through Triton's
interpreter), the compile column as usual — everything but the device. Writes ``benchmarks/results/gpu_suite.json`` (dry run: ``gpu_suite_dry.json``) with the
machine, load average, rows, summary, the issue's goal and the time taken; exit 1 when a problem
failed or a generated kernel was wrong, 2 on bad input (no CUDA device outside the dry run).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from benchmarks.common import ROOT, write_result

GOAL = {"geomean_vs_best_of": 1.2, "slower_than_eager": 0}
TOTAL_S = 450.0
COMPARE_S = 20.0  # the compare job per problem (eager, torch.compile, best): compile dominates
MIN_WALL_S = 20.0
DRY_SCALE = 1 / 32
DRY_MAX_ELEMENTS = 1 << 12


def _write_json(path: Path, name: str, data: dict, started: float) -> Path:
    import json

    from benchmarks.common import machine

    payload = {"benchmark": name, "duration_s": round(time.monotonic() - started, 1), "machine": machine(), **data}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    return path


def _dry_exclude() -> list[str]:
    """The dry run's campaigns try the generated Triton kernels only: on the CPU every other move
    would be measured at sizes and on a device that say nothing about the GPU, and torch.compile
    is exercised by the suite's own compile column already."""
    from arbor.agents.skills import load_skills

    return sorted(s.name for s in load_skills() if s.kind == "hard" and s.domain in ("kernel", "any")
                  and not any(m.transform == "triton_codegen" for m in s.moves))


def _ints(text: str | None) -> list[int] | None:
    return [int(x) for x in text.split(",") if x.strip()] if text else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=ROOT / "benchmarks" / "problems_gpu")
    ap.add_argument("--out", type=Path, default=None, help="suite folder (resumable); default under benchmarks/results")
    ap.add_argument("--ids", default=None)
    ap.add_argument("--levels", default=None)
    ap.add_argument("--budget", type=int, default=None, help="evaluations per problem (default 4; dry run 1)")
    ap.add_argument("--total-s", type=float, default=TOTAL_S, help="wall budget of the whole run")
    ap.add_argument("--json", type=Path, default=None, help="write the results here instead of benchmarks/results")
    args = ap.parse_args(argv)
    dry = os.environ.get("ARBOR_GPU_SUITE_DRY", "") not in ("", "0")
    started = time.monotonic()

    import torch

    from arbor.sandbox.problem import ProblemError
    from arbor.suite.discover import discover
    from arbor.suite.run import SuiteOptions, run_suite
    from benchmarks.triton_kernels import check_dir

    if not dry and not torch.cuda.is_available():
        print("gpu_suite: no CUDA device here; run it on a GPU host, or ARBOR_GPU_SUITE_DRY=1 for the CPU dry run",
              file=sys.stderr)
        return 2
    if dry and os.environ.get("TRITON_INTERPRET") != "1":
        print("gpu_suite: the dry run needs TRITON_INTERPRET=1 in its environment (scripts/gpu_suite.sh sets it)",
              file=sys.stderr)
        return 2
    try:
        entries = discover(args.dir, _ints(args.ids), _ints(args.levels))
    except ProblemError as exc:
        print(f"gpu_suite: {exc}", file=sys.stderr)
        return 2
    device = "cpu" if dry else "cuda"
    name = "gpu_suite_dry" if dry else "gpu_suite"
    out = args.out or ROOT / "benchmarks" / "results" / f"{name}_run"

    print(f"== generated Triton kernels on {device}{' (interpreter)' if dry else ''}")
    kernels = check_dir(args.dir, device, DRY_MAX_ELEMENTS if dry else None, only={e.path.stem for e in entries})
    wrong = [f"{r['problem']} {r['move']}" for r in kernels if r.get("ok") is False]

    left = args.total_s - (time.monotonic() - started)
    per_problem = left / len(entries)
    max_wall = max(MIN_WALL_S, per_problem - COMPARE_S)
    budget = args.budget or (1 if dry else 4)
    print(f"== arbor suite: {len(entries)} problems on {device}, {budget} evaluations and {max_wall:.0f} s each")
    result = run_suite(SuiteOptions(directory=args.dir, out=out, ids=_ints(args.ids), levels=_ints(args.levels),
                                    budget=budget, max_wall_s=max_wall, device=device,
                                    scale=DRY_SCALE if dry else None, max_cv=2.0 if dry else 0.15,
                                    exclude=_dry_exclude() if dry else []))
    print(result["table"])
    summ = result["summary"]
    met = {k: (summ.get(k) is not None and (summ[k] >= v if k.startswith("geomean") else summ[k] <= v))
           for k, v in GOAL.items()}
    elapsed = time.monotonic() - started
    print(f"goal (geomean vs best-of >= {GOAL['geomean_vs_best_of']}x, none slower than eager): "
          f"{'met' if all(met.values()) else 'not met'}{' (dry run: CPU numbers mean nothing)' if dry else ''}; "
          f"{elapsed:.0f} s of {args.total_s:.0f}")
    if wrong:
        print(f"WRONG generated kernels: {', '.join(wrong)}")
    data = {"dry_run": dry, "device": device, "dir": str(args.dir), "suite_out": str(out),
            "budget": budget, "max_wall_s_per_problem": max_wall, "total_s": args.total_s,
            "elapsed_s": round(elapsed, 1), "within_total": elapsed <= args.total_s,
            "goal": GOAL, "goal_met": met, "summary": summ, "rows": result["rows"],
            "kernels": kernels, "table": result["table"]}
    path = write_result(name, data, started) if args.json is None else _write_json(args.json, name, data, started)
    print(f"results: {path}")
    failed = [r["key"] for r in result["rows"] if "error" in r]
    return 1 if failed or wrong else 0


if __name__ == "__main__":
    sys.exit(main())

"""How much any epilogue work could gain on the development set's GEMM/conv chains.

Issue 28 wants the development set's geomean vs best-of(eager, ``torch.compile``) at >= 1.1x
without the algebraic collapses. On the rebalanced mix the chains that do not collapse ended at
1.000x with compile 1-5% ahead. Before calling that a search failure, this measures the bound:
each chain's reference is profiled as a campaign profiles it (one thread, the suite's calibrated
size, the profile's shares anchored to the measured time per call), and the share of its time in
GEMM and convolution ops is what no fusion, allocation or layout move around them removes. If
the rest cost nothing, the reference would run ``1 / share`` times faster: the **epilogue
ceiling**. A ceiling below the goal means the goal needs a faster GEMM or convolution than the
library's (MKL / oneDNN on this CPU), not better epilogue work.

The profiler slows small ops more than large ones, so the non-GEMM share reads high and every
ceiling here is an upper bound. Compile's own speedup, when ``--compile`` is given, is measured
against eager with the campaign's paired, interleaved protocol (the suite's ``compile_default``).

    python -m benchmarks.epilogue_ceiling                       # every l2_* chain that does not collapse
    python -m benchmarks.epilogue_ceiling --problems l2_02,l2_10 --compile

Writes ``benchmarks/results/epilogue_ceiling.json`` with the load average.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.common import ROOT, fmt, table, write_result

PROBLEMS = ROOT / "benchmarks" / "problems"
COLLAPSING = ("l1_10_", "l2_03_", "l2_05_")  # the set's algebraic collapses (benchmarks/problems/README.md)
CALIBRATIONS = [ROOT / "benchmarks" / "results" / d / "calibration.json"
                for d in ("dev_subset_after", "generalization_run", "generalization_run_b")]
GOAL = 1.1
LIBRARY = ("gemm", "conv")  # the profile categories a library kernel owns


def known_scales() -> dict[str, float]:
    out: dict[str, float] = {}
    for path in CALIBRATIONS:
        try:
            for stem, c in json.loads(path.read_text()).items():
                out.setdefault(stem, float(c["scale"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def chains(names: list[str] | None) -> list[Path]:
    paths = [p for p in sorted(PROBLEMS.glob("l2_*.py")) if not p.name.startswith(COLLAPSING)]
    if names:
        paths = [p for p in sorted(PROBLEMS.glob("l*.py")) if any(p.stem.startswith(n) for n in names)]
    return paths


def ceiling(categories: dict[str, float]) -> tuple[float, float]:
    """(library share, 1 / share): the bound if everything outside GEMM/conv cost nothing."""
    share = sum(v for k, v in categories.items() if k in LIBRARY)
    return share, (1.0 / share if share > 0 else math.inf)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", help="comma-separated stem prefixes (default: every l2_* chain that does not collapse)")
    ap.add_argument("--compile", action="store_true", help="also measure torch.compile's speedup over eager")
    ap.add_argument("--time-target-ms", type=float, default=20.0)
    ap.add_argument("--out", default="epilogue_ceiling")
    args = ap.parse_args(argv)
    started = time.monotonic()
    load0 = os.getloadavg()

    from arbor.agents.transforms import to_modelnew
    from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernel
    from arbor.sandbox.kernel.profile_job import run_profile
    from arbor.sandbox.runner import make_runner
    from arbor.suite.calibrate import calibrate
    from arbor.suite.compare import compile_default

    scales = known_scales()
    runner = make_runner("local")
    rows = []
    try:
        for path in chains(args.problems.split(",") if args.problems else None):
            scale = scales.get(path.stem)
            if scale is None:
                scale = calibrate(path, args.time_target_ms)["scale"]
            src = path.read_text()
            req = KernelRequest(problem_source=src, candidate_source=to_modelnew(src), num_threads=1,
                                size_scale=scale, mode="aa", time_budget_s=1.0)
            m = measure_kernel(runner, req)
            if not m.ok:
                rows.append({"problem": path.stem, "scale": scale, "error": f"{m.error_class}: {m.error_text}"[:200]})
                continue
            call_s = statistics.median(m.baseline_samples)
            p = run_profile(runner, req, m.stats.get("sol_peak"), call_s)
            if p.get("error"):
                rows.append({"problem": path.stem, "scale": scale, "error": str(p["error"])[:200]})
                continue
            share, ceil = ceiling(p["categories"])
            row = {"problem": path.stem, "scale": scale, "eager_ms": call_s * 1e3, "library_share": share,
                   "ceiling_vs_eager": ceil, "categories": p["categories"], "dominant": p.get("dominant")}
            compiled = compile_default(req.candidate_source) if args.compile else None
            if compiled is not None:  # the same request, the compiled reference as the candidate
                c = measure_kernel(runner, replace(req, candidate_source=compiled, mode="ab"))
                if c.ok:
                    row["compile_vs_eager"] = statistics.median(c.baseline_samples) / statistics.median(c.candidate_samples)
                    row["ceiling_vs_best_of"] = ceil / max(1.0, row["compile_vs_eager"])
                else:
                    row["compile_error"] = f"{c.error_class}: {c.error_text}"[:200]
            rows.append(row)
            print(f"{path.stem}: GEMM/conv {share:.0%} of {call_s * 1e3:.2f} ms -> ceiling {ceil:.3f}x vs eager"
                  + (f", compile {row['compile_vs_eager']:.3f}x" if "compile_vs_eager" in row else ""), flush=True)
    finally:
        runner.close()
    ok = [r for r in rows if "ceiling_vs_eager" in r]
    geo = math.exp(statistics.fmean(math.log(r["ceiling_vs_eager"]) for r in ok)) if ok else None
    print(table([{**r, "library_share": f"{r.get('library_share', 0):.0%}"} for r in rows],
                [("problem", "problem"), ("scale", "scale"), ("eager_ms", "eager ms"), ("library_share", "GEMM/conv share"),
                 ("ceiling_vs_eager", "ceiling vs eager"), ("compile_vs_eager", "compile vs eager"),
                 ("ceiling_vs_best_of", "ceiling vs best-of"), ("error", "error")]))
    below = [r["problem"] for r in ok if r["ceiling_vs_eager"] < GOAL]
    print(f"geomean of the ceilings vs eager: {fmt(geo, 3)}x over {len(ok)} chains; {len(below)} below {GOAL}x "
          f"even if everything outside GEMM/conv were free; load average {load0[0]:.1f} at start, "
          f"{os.getloadavg()[0]:.1f} at end")
    path_out = write_result(args.out, {"rows": rows, "geomean_ceiling_vs_eager": geo, "below_goal": below,
                                       "goal": GOAL, "load_avg_start": list(load0),
                                       "load_avg_end": list(os.getloadavg())}, started)
    print(f"wrote {path_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

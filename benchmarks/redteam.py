"""The red team at full size: ``arbor redteam PROBLEM.py --seed 0`` on the quickstart problem and the MLP.

    python -m benchmarks.redteam [--seed 0] [--workers 2] [--problems campaigns/problems/gelu_gate.py ...] [--hooks]
    python -m benchmarks.redteam --hooks-only     # the four hook candidates alone: redteam_hooks.json

Issue 27's acceptance: per problem >= 200 generated hostile variants across >= 12 classes x >= 4
disguises, none accepted, and >= 30 honest twins in all, none flagged. Prints, per problem, the
totals and the per-class table, and the wall time with the load average at start and end (the box
is shared: other work slows every measurement, and attack success must stay 0 regardless).

``--hooks`` also runs the four global-hook candidates of issue 27 (tests/adversarial/hostile/c22,
c22b, c22c, c22d: pre-forward and forward, direct and disguised) through ``arbor eval``, on the
machine as it is and then with one busy process per core (started here, killed by PID after):
each must be ``hack_suspected`` naming the hook.

Writes benchmarks/results/redteam.json (per problem: the report's summary without the variants'
sources, the worst offenders' sources kept; the hook candidates' verdicts).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import ROOT, table, write_result

PROBLEMS = [ROOT / "campaigns" / "problems" / "gelu_gate.py", ROOT / "tests" / "adversarial" / "problems" / "mlp.py"]
HOOKS = ["c22_module_forward_pre_hook", "c22b_module_forward_hook", "c22c_forward_pre_hook_disguised",
         "c22d_forward_hook_disguised"]


def hook_candidates() -> list[dict]:
    """The four through ``arbor eval``: idle (as idle as the box is), then busy (a spinner per core)."""
    from arbor.campaign.evaluate import evaluate

    problem = ROOT / "tests" / "adversarial" / "problems" / "act.py"
    rows = []
    for machine in ("idle", "busy"):
        spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    for _ in range(os.cpu_count() or 1)] if machine == "busy" else []
        try:
            for name in HOOKS:
                t0 = time.monotonic()
                res = evaluate(problem, ROOT / "tests" / "adversarial" / "hostile" / f"{name}.py")
                rows.append({"machine": machine, "candidate": name, "decision": res["decision"],
                             "diagnosis": res["diagnosis"], "reason": res["reason"], "wall_s": round(time.monotonic() - t0, 1),
                             "load_avg": list(os.getloadavg())})
                print(f"{machine:5} {name:35} {res['decision']}/{res['diagnosis']}: {res['reason'][:120]}")
        finally:
            for p in spinners:
                p.kill()
                p.wait()
    return rows


def _named(hooks: list[dict]) -> int:
    """Hook candidates rejected as hack_suspected with the hook's registry named."""
    return sum(1 for h in hooks if h["diagnosis"] == "hack_suspected"
               and "hooks (register_module_forward" in (h["reason"] or ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--problems", nargs="*", type=Path, default=PROBLEMS)
    ap.add_argument("-o", "--out", type=Path, default=None, help="keep each run's directory (sources, escapes) here")
    ap.add_argument("--hooks", action="store_true", help="also the four global-hook candidates, idle and busy")
    ap.add_argument("--hooks-only", action="store_true",
                    help="only the hook candidates, written to redteam_hooks.json (the full run's JSON is kept)")
    args = ap.parse_args(argv)
    if args.hooks_only:
        started = time.monotonic()
        hooks = hook_candidates()
        named = _named(hooks)
        print(f"wrote {write_result('redteam_hooks', {'hook_candidates': hooks, 'named': named}, started)}: "
              f"{named} of {len(hooks)} named hack_suspected with the hook")
        return 0 if named == len(hooks) else 1
    from arbor.redteam import session

    started = time.monotonic()
    runs = {}
    for problem in args.problems:
        t0, load0 = time.monotonic(), os.getloadavg()
        out = args.out / problem.stem if args.out else None
        summary = session.run(problem, seed=args.seed, workers=args.workers, out_dir=out,
                              progress=lambda v, what: None)
        summary["load_avg_start"], summary["load_avg_end"] = list(load0), list(os.getloadavg())
        summary["wall_s"] = round(time.monotonic() - t0, 1)
        runs[problem.stem] = {k: v for k, v in summary.items() if k != "variants"} | {
            "variants": summary["variants"]}
        rows = [{"class": k, **{c: str(r[c]) for c in ("hostile", "accepted", "caught", "stopped", "stopped_by_noise",
                                                       "by_guard", "honest", "flagged")}}
                for k, r in summary["per_class"].items()]
        print(f"\n{problem.stem}: {summary['hostile']} hostile ({summary['classes']} classes x {summary['disguises']} "
              f"disguises), {summary['accepted']} accepted, {summary['caught']} caught, {summary['stopped_by_noise']} "
              f"stopped only by noise; {summary['honest']} twins, {summary['false_positives']} flagged, "
              f"{summary['honest_accepted']} accepted; {summary['wall_s']:.0f} s, load {load0[0]:.1f} -> "
              f"{os.getloadavg()[0]:.1f}")
        print(table(rows, [(c, c) for c in ("class", "hostile", "accepted", "caught", "stopped", "stopped_by_noise",
                                             "by_guard", "honest", "flagged")]))
    totals = {"hostile": sum(r["hostile"] for r in runs.values()), "accepted": sum(r["accepted"] for r in runs.values()),
              "honest": sum(r["honest"] for r in runs.values()),
              "false_positives": sum(r["false_positives"] for r in runs.values())}
    print(f"\ntotal: {totals['hostile']} hostile, {totals['accepted']} accepted; {totals['honest']} twins, "
          f"{totals['false_positives']} flagged")
    hooks = hook_candidates() if args.hooks else None
    if hooks is not None:
        totals["hook_candidates_named"] = _named(hooks)
    path = write_result("redteam", {"seed": args.seed, "workers": args.workers, "totals": totals, "runs": runs,
                                    "hook_candidates": hooks}, started)
    print(f"wrote {path}")
    ok = totals["accepted"] == 0 and totals["false_positives"] == 0
    return 0 if ok and (hooks is None or totals["hook_candidates_named"] == len(hooks)) else 1


if __name__ == "__main__":
    raise SystemExit(main())

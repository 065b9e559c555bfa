"""The GPU development set end to end: generated kernels checked, then ``arbor suite`` on one GPU.

``scripts/gpu_suite.sh`` runs this unattended on a GPU host. Two steps, one budget:

1. every ``triton_codegen`` kernel of the set against the reference on the device (which problems
   get one, correct or not, eager vs kernel time) — ``benchmarks/triton_kernels.py``;
2. ``arbor suite`` (calibrate, campaign, compare, table) on the set at the files' own GPU sizes,
   the per-problem wall budget cut so the whole run ends within ``--total-s`` (default 450 s: the
   8 minutes of the issue less the install). The table is the CPU suite's: eager, compile,
   verified best, vs best-of(eager, compile).

``--total-s`` is a deadline, not a plan (``arbor/suite/deadline.py``): the kernel check stops at
its share of it, each campaign's wall budget is cut to what is left, problems that cannot get
their minimum are skipped and named (``skipped``), and the JSON is rewritten after every problem
(``complete: false`` until the end; ``interrupted`` when SIGINT — the lease's own limit — came
first), so a cut-off run still returns what it measured.

``ARBOR_GPU_SUITE_DRY=1`` is the CPU dry run: the same problems at a tiny size on the CPU, a
budget of one candidate chosen among the generated Triton kernels (run through Triton's
interpreter), the compile column as usual — everything but the device. Writes ``benchmarks/results/gpu_suite.json`` (dry run: ``gpu_suite_dry.json``) with the
machine, load average, rows, summary, the issue's goal and the time taken; exit 1 when a problem
failed or a generated kernel was wrong, 2 on bad input (no CUDA device outside the dry run).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from benchmarks.common import ROOT

GOAL = {"geomean_vs_best_of": 1.2, "slower_than_eager": 0}
TOTAL_S = 450.0
COMPARE_S = 20.0  # the compare job per problem (eager, torch.compile, best): compile dominates
MIN_WALL_S = 20.0
KERNEL_SHARE = 0.25  # of the deadline, at most, for the generated-kernel check
# after the deadline: the interrupted step's clean-up (jobs killed, the campaign marked), the JSON
# and the interpreter's exit — 32 s after a SIGINT at 292 s of a 300 s dry run on a loaded 2-core host
RESERVE_SHARE, MIN_RESERVE_S = 0.15, 10.0
DRY_SCALE = 1 / 32
DRY_MAX_ELEMENTS = 1 << 12


def _write_json(path: Path, name: str, data: dict, started: float) -> Path:
    import json

    from benchmarks.common import machine

    payload = {"benchmark": name, "duration_s": round(time.monotonic() - started, 1), "machine": machine(), **data}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")  # rewritten after every problem: never half a file if cut off
    tmp.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    os.replace(tmp, path)
    return path


def _dry_exclude() -> list[str]:
    """The dry run's campaigns try the generated Triton kernels only: on the CPU every other move
    would be measured at sizes and on a device that say nothing about the GPU, and torch.compile
    is exercised by the suite's own compile column already."""
    from arbor.agents.skills import load_skills

    return sorted(s.name for s in load_skills() if s.kind == "hard" and s.domain in ("kernel", "any")
                  and not any(m.transform == "triton_codegen" for m in s.moves))


def _started() -> float:
    """The run's start on the monotonic clock: ``$ARBOR_SUITE_T0`` (epoch seconds, set by
    scripts/gpu_suite.sh before the interpreter and torch load — tens of seconds on a busy host)
    when given, else now."""
    t0 = os.environ.get("ARBOR_SUITE_T0", "")
    try:
        return time.monotonic() - max(0.0, time.time() - float(t0))
    except ValueError:
        return time.monotonic()


def _interrupt_at(seconds: float) -> None:
    """SIGINT to ourselves at the deadline, and every 5 s after: whatever step is running then
    (a campaign, a compare job) is interrupted as Ctrl-C would (jobs killed, the campaign marked
    interrupted), never left to run past the deadline; the campaign's own handler defers it out of
    an import or a store call, and the repeats reach a step that swallowed the first."""
    signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.1), 5.0)


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
    started = _started()

    import torch

    from arbor.sandbox.kernel.problem import ProblemError
    from arbor.suite.deadline import Deadline
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

    deadline = Deadline(args.total_s - max(MIN_RESERVE_S, RESERVE_SHARE * args.total_s), start=started)
    budget = args.budget or (1 if dry else 4)
    data = {"dry_run": dry, "device": device, "dir": str(args.dir), "suite_out": str(out), "budget": budget,
            "total_s": args.total_s, "goal": GOAL, "complete": False, "kernels": [], "rows": [], "skipped": {}}
    path = args.json or ROOT / "benchmarks" / "results" / f"{name}.json"

    def save(**more) -> None:  # after every step: a run cut off still returns what it measured
        data.update(more, elapsed_s=round(time.monotonic() - started, 1))
        _write_json(path, name, data, started)

    print(f"== generated Triton kernels on {device}{' (interpreter)' if dry else ''}")
    kernel_end = args.total_s * KERNEL_SHARE
    _interrupt_at(deadline.left())
    try:
        for e in entries:
            if time.monotonic() - started > kernel_end:
                data["kernels"].append({"problem": e.path.stem, "move": "-",
                                        "result": f"not checked: the kernel check's share ({kernel_end:.0f} s) is spent"})
                continue
            data["kernels"] += check_dir(args.dir, device, DRY_MAX_ELEMENTS if dry else None, only={e.path.stem})
        wrong = [f"{r['problem']} {r['move']}" for r in data["kernels"] if r.get("ok") is False]
        save()

        per_problem = deadline.left() / len(entries)
        max_wall = max(MIN_WALL_S, per_problem - COMPARE_S)
        print(f"== arbor suite: {len(entries)} problems on {device}, {budget} evaluations and {max_wall:.0f} s each, "
              f"{deadline.left():.0f} s left")
        result = run_suite(SuiteOptions(directory=args.dir, out=out, ids=_ints(args.ids), levels=_ints(args.levels),
                                        budget=budget, max_wall_s=max_wall, device=device,
                                        scale=DRY_SCALE if dry else None, max_cv=2.0 if dry else 0.15,
                                        exclude=_dry_exclude() if dry else [], deadline=deadline,
                                        compare_s=COMPARE_S, min_problem_s=MIN_WALL_S + COMPARE_S),
                           on_row=lambda rows, skipped: save(rows=rows, skipped=skipped))
    except KeyboardInterrupt:  # the deadline, or the caller's limit: what was measured is already written
        signal.setitimer(signal.ITIMER_REAL, 0)
        why = "the suite's deadline" if deadline.left() <= 0 else "SIGINT"
        finished = {r.get("key") for r in data["rows"]} | set(data["skipped"])
        save(interrupted=why, not_finished=[e.key for e in entries if e.key not in finished])
        print(f"gpu_suite: interrupted by {why} after {time.monotonic() - started:.0f} s; partial results: {path}")
        return 1
    signal.setitimer(signal.ITIMER_REAL, 0)
    print(result["table"])
    if result["skipped"]:
        print(f"skipped under the deadline: {', '.join(result['skipped'])}")
    summ = result["summary"]
    met = {k: (summ.get(k) is not None and (summ[k] >= v if k.startswith("geomean") else summ[k] <= v))
           for k, v in GOAL.items()}
    elapsed = time.monotonic() - started
    print(f"goal (geomean vs best-of >= {GOAL['geomean_vs_best_of']}x, none slower than eager): "
          f"{'met' if all(met.values()) else 'not met'}{' (dry run: CPU numbers mean nothing)' if dry else ''}; "
          f"{elapsed:.0f} s of {args.total_s:.0f}")
    if wrong:
        print(f"WRONG generated kernels: {', '.join(wrong)}")
    save(max_wall_s_per_problem=max_wall, within_total=elapsed <= args.total_s, goal_met=met, summary=summ,
         rows=result["rows"], skipped=result["skipped"], table=result["table"], complete=not result["skipped"])
    print(f"results: {path}")
    failed = [r["key"] for r in result["rows"] if "error" in r]
    return 1 if failed or wrong else 0


if __name__ == "__main__":
    sys.exit(main())

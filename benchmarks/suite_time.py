"""How long the test suite (or a part of it) takes serially and on pytest-xdist workers.

    python -m benchmarks.suite_time [--modes 0,2] [--every 4] [--name suite_time] [PATH ...]

Each mode runs ``python -m pytest -q -p no:cacheprovider -n MODE`` (``-n 0``: serial) over the same
paths, one after the other in one session, so both share whatever else the machine is doing; the
load is recorded beside each. No paths: the whole suite. ``--every K`` takes every K-th test file
of the suite (sorted, from the second): a sample of the suite's mix of unit tests, campaigns,
builds and tests marked ``timing``. Per mode: wall time, CPU time (user + sys of pytest and every
child it reaped), the 1-min load before and after, and the outcome line. Why it matters: the
default of ``python3 -m pytest -q`` (serial or workers) is chosen on this measurement
(docs/performance.md#test-suite), and a newcomer waits for it.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

from .common import ROOT, table, write_result


def sample(every: int) -> list[str]:
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py"))
    return files[1::every]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_mode(mode: int, paths: list[str], timeout_s: float) -> dict:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", str(mode), *paths]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    load0, cpu0, t0 = os.getloadavg()[0], _children_cpu(), time.monotonic()
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, env=env)
    wall, cpu = time.monotonic() - t0, _children_cpu() - cpu0
    outcome = next((ln.strip("= ") for ln in reversed(res.stdout.splitlines())
                    if re.search(r"\d+ (passed|failed|error)", ln)), f"exit {res.returncode}")
    failed = [ln for ln in res.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
    return {"mode": "serial" if mode == 0 else f"-n {mode}", "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2), "outcome": outcome,
            "failed": failed, "returncode": res.returncode}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", help="test files or folders (default: the whole suite, or --every)")
    ap.add_argument("--modes", default="0,2", help="comma-separated -n values; 0 is serial (default 0,2)")
    ap.add_argument("--every", type=int, default=0, help="every K-th test file of the suite instead of paths")
    ap.add_argument("--timeout-s", type=float, default=3600.0)
    ap.add_argument("--name", default="suite_time", help="the result file's name under benchmarks/results/")
    args = ap.parse_args(argv)
    paths = args.paths or (sample(args.every) if args.every else [])
    started = time.monotonic()
    rows = [run_mode(int(m), paths, args.timeout_s) for m in args.modes.split(",")]
    print(table(rows, [("mode", "mode"), ("wall_s", "wall s"), ("cpu_s", "CPU s"), ("load_before", "load before"),
                       ("load_after", "load after"), ("outcome", "outcome")]))
    path = write_result(args.name, {"paths": paths or ["tests (whole suite)"], "cores_allowed": len(os.sched_getaffinity(0)),
                                    "rows": rows}, started)
    print(f"wrote {path.relative_to(ROOT)}")
    return 0 if all(r["returncode"] == 0 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

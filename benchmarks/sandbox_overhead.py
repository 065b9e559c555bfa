"""Sandbox overhead per candidate: local runner vs Docker cold (new container) vs Docker warm.

Two workloads, each repeated ``--reps`` times per runner:

* ``noop``   — ``python -c pass``: the runner's own cost (workdir, isolation, exec, clean-up);
* ``kernel`` — a full kernel-protocol measurement of a trivial candidate (64x64 ReLU) with the
  smallest timing budget, i.e. what one campaign step pays for a candidate that costs nothing.

The overhead column is the median minus the local runner's median for the same workload. Goal
(issue 7): warm Docker adds at most 0.5 s per candidate.

    python -m benchmarks.sandbox_overhead              # uses $DOCKER_HOST, or starts a private dockerd
    python -m benchmarks.sandbox_overhead --reps 5 --no-docker

Writes ``benchmarks/results/sandbox_overhead.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernel
from arbor.sandbox.runners.local import LocalRunner
from arbor.sandbox.runner import Job, Runner
from benchmarks.common import table, write_result

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
"""
CANDIDATE = PROBLEM.replace("class Model(", "class ModelNew(").replace("torch.relu(x)", "torch.clamp_min(x, 0.0)")
GOAL_S = 0.5


def _noop(runner: Runner) -> float:
    t0 = time.perf_counter()
    res = runner.run(Job([sys.executable, "-c", "pass"], {}, timeout_s=60))
    assert res.returncode == 0, res.stderr_tail
    return time.perf_counter() - t0


def _kernel(runner: Runner) -> float:
    req = KernelRequest(problem_source=PROBLEM, candidate_source=CANDIDATE, warmup_s=0.0, time_budget_s=0.05,
                        min_repeats=5, max_repeats=5, min_sample_s=1e-5, timeout_s=120, num_threads=1)
    t0 = time.perf_counter()
    m = measure_kernel(runner, req)
    assert m.ok, (m.error_class, m.error_text)
    return time.perf_counter() - t0


def _interleaved(makers: dict, work, reps: int) -> dict[str, list[float]]:
    """Round-robin over the runners (A B C A B C ...) so load drift on a shared box hits all of
    them alike. ``makers``: name -> (factory, fresh_each); fresh_each means a new runner (so a new
    container) per repetition — the cold case."""
    warm = {name: make() for name, (make, fresh) in makers.items() if not fresh}
    times: dict[str, list[float]] = {name: [] for name in makers}
    try:
        for r in warm.values():
            work(r)  # warm-up: image build, container start, page cache
        for _ in range(reps):
            for name, (make, fresh) in makers.items():
                if fresh:
                    r = make()
                    try:
                        times[name].append(work(r))
                    finally:
                        r.close()
                else:
                    times[name].append(work(warm[name]))
    finally:
        for r in warm.values():
            r.close()
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--no-docker", action="store_true")
    args = ap.parse_args()
    started = time.monotonic()
    runners: dict[str, tuple] = {"local": (LocalRunner, False)}
    daemon = None
    if not args.no_docker:
        if not os.environ.get("DOCKER_HOST") and not os.path.exists("/var/run/docker.sock"):
            from tests.docker_engine import PrivateDockerd

            daemon = PrivateDockerd()
            daemon.start()
            os.environ["DOCKER_HOST"] = daemon.url
        from arbor.sandbox.runners.docker import DockerRunner

        DockerRunner(campaign="bench-warmup").close()  # builds the image outside the timings

        def docker(warm: bool):
            return lambda: DockerRunner(campaign=f"bench-sandbox-overhead-{'warm' if warm else 'cold'}", warm=warm)

        runners["docker cold"] = (docker(False), True)
        runners["docker warm"] = (docker(True), False)
    rows, raw = [], {}
    try:
        for workload, work in (("noop", _noop), ("kernel", _kernel)):
            times = _interleaved(runners, work, args.reps)
            base = statistics.median(times["local"])
            for name, xs in times.items():
                raw[f"{workload}/{name}"] = xs
                med = statistics.median(xs)
                rows.append({"workload": workload, "runner": name, "median_s": med, "min_s": min(xs),
                             "max_s": max(xs), "overhead_s": med - base})
    finally:
        if daemon is not None:
            daemon.stop()
    print(table([{**r, **{k: f"{v:.3f}" for k, v in r.items() if isinstance(v, float)}} for r in rows],
                [("workload", "workload"), ("runner", "runner"), ("median_s", "median s"), ("min_s", "min s"),
                 ("max_s", "max s"), ("overhead_s", "+ vs local s")]))
    warm = next((r["overhead_s"] for r in rows if r["workload"] == "kernel" and r["runner"] == "docker warm"), None)
    verdict = None if warm is None else warm <= GOAL_S
    if warm is not None:
        print(f"\nwarm Docker adds {warm:.3f} s per candidate (goal <= {GOAL_S} s): {'met' if verdict else 'MISSED'}")
    path = write_result("sandbox_overhead", {"reps": args.reps, "rows": rows, "samples_s": raw,
                                             "goal_s": GOAL_S, "goal_met": verdict}, started)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""Where one evaluation's time goes: process start, imports, device context, build, correctness,
warm-up, timing, the checks after timing, the runner's set-up and clean-up, result handling in the
parent (parse, fingerprint, store writes), the Critic and the profile job — for the baseline A/A
and for one candidate, each measured as a campaign measures it (the loop's own ``measure`` and
``critique`` steps on a real campaign context), with a fresh process per job ("fresh": how every
job ran before the warm worker) and with the warm worker ("warm", the default), side by side in one
run: every repetition runs both, in alternating order, so a neighbour's load hits both alike.

    python -m benchmarks.eval_overhead                    # the quickstart on the CPU, 2 repetitions
    python -m benchmarks.eval_overhead --device cuda      # on a GPU (scripts/gpu_check.sh runs this)
    python -m benchmarks.eval_overhead --reps 3 --modes warm
    python -m benchmarks.eval_overhead --modes fresh,warm,docker   # + the Docker runner (docker exec per job)

The *non-timing cost* of an evaluation is everything but its timing rounds and its correctness
rounds (the seed loop with its determinism re-run and liveness check, and the re-check after timing:
seed 0 again and the two cache probes — each runs the reference and the candidate and compares
them). The goal (issue 25): at most 3 s, on the CPU here and on a GPU.

The baseline evaluation is its A/A measurement, the Critic's verdict (the noise floor) and what
the loop does after it (the bottleneck profile, the knowledge record); the candidate evaluation is
one measurement of a candidate and its verdict (a new best's confirmation is a second measurement
like it). The first evaluation of a runner also starts its warm worker; that start is its own row.

Writes ``benchmarks/results/eval_overhead.json`` (``eval_overhead_cuda.json`` for ``--device cuda``;
``--out NAME`` for another name).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.common import ROOT, table, write_result

CAMPAIGN = ROOT / "campaigns" / "quickstart.yaml"
# A candidate as the quickstart's heuristic moves write one: the tanh-GELU and the SiLU gate as
# torch's fused functions (faster, and not bit-identical to the reference: a real comparison).
CANDIDATE_FORWARD = ("        return torch.nn.functional.gelu(x, approximate='tanh') * "
                     "torch.nn.functional.silu(gate)\n")
GOAL_S = 3.0

# Rows of the phase table: (key, label). Harness phases come from KernelMeasurement.phase_times,
# runner phases from JobResult.phase_times (merged into it by the kernel protocol), parent phases
# from timestamps taken here around the loop's collaborators.
ROWS = [
    ("worker_start", "warm worker start / script warm-up (first job only)"),
    ("protocol", "parent: request, job files, peak lookup, parse"),
    ("hooks_before", "runner hooks before (clock verify)"),
    ("runner_setup", "runner: workdir, files, cgroup, isolation"),
    ("process", "process start + exit (exec | fork, child set-up)"),
    ("torch_import", "imports: torch (+ allocator pin)"),
    ("harness_modules", "imports: harness modules"),
    ("device", "device context + fingerprint"),
    ("peak", "CPU peak measurement (once per machine)"),
    ("build", "build: problem, reference run, cost, snapshots"),
    ("correctness", "correctness rounds (seeds, determinism, liveness)"),
    ("warmup", "warm-up + calibration + input pools"),
    ("rounds", "timing rounds"),
    ("after_timing", "checks after timing (spot checks, quiet window)"),
    ("recheck", "re-check after timing (seed 0, cache probes)"),
    ("harness_other", "harness: checkpoints, verify, result write"),
    ("runner_collect", "runner: kill tree, drains, outputs, clean-up"),
    ("hooks_after", "runner hooks after (fingerprint)"),
    ("store", "store writes (measurement, verdict)"),
    ("critic", "Critic (gates, statistics)"),
    ("profile", "profile job (baseline / new best)"),
    ("knowledge", "knowledge record (problem signature)"),
    ("loop_other", "loop: lease, index, events, other"),
]
TIMING = ("rounds",)
CORRECTNESS = ("correctness", "recheck")


# ---------------------------------------------------------------- accounting (pure, unit-tested)
def account(rec: dict) -> dict[str, float]:
    """One evaluation's record -> seconds per row of ``ROWS`` (plus ``total``).

    ``rec``: ``total`` (wall of the loop's measure + critique steps), ``measurements`` (the phase
    times of each job: harness phases + the runner's, and ``job_wall`` — the runner's spawn-to-exit
    seconds), and the parent-side sums: ``adapter`` (the target adapter's measure: protocol + runner),
    ``runner_run`` (Runner.run), ``hooks_before``, ``hooks_after``, ``store``, ``critic``,
    ``profile``, ``knowledge``. Rows that are sums over jobs; what no mark covers lands in
    ``harness_other`` (inside the job) or ``loop_other`` (in the parent)."""
    out = {key: 0.0 for key, _label in ROWS}
    for pt in rec.get("measurements") or []:
        g = lambda k: float(pt.get(k) or 0.0)  # noqa: E731
        out["worker_start"] += g("worker_start")
        out["runner_setup"] += g("runner_setup")
        out["runner_collect"] += g("runner_collect") + g("runner_cleanup")
        out["process"] += max(g("job_wall") - g("harness"), 0.0)
        for k in ("torch_import", "harness_modules", "device", "peak", "correctness", "warmup", "rounds",
                  "recheck"):
            out[k] += g(k)
        out["build"] += g("import")
        out["after_timing"] += g("spot_checks") + g("after_timing")
        out["rounds"] += g("integrity_guard")  # the state swap and check around each timed sample
        marked = sum(g(k) for k in ("torch_import", "harness_modules", "device", "peak", "import", "correctness",
                                    "warmup", "rounds", "integrity_guard", "spot_checks", "after_timing",
                                    "recheck"))
        out["harness_other"] += max(g("harness") - marked, 0.0)
    f = lambda k: float(rec.get(k) or 0.0)  # noqa: E731
    runner_inner = sum(float(pt.get(k) or 0.0) for pt in rec.get("measurements") or []
                       for k in ("job_wall", "runner_setup", "runner_collect", "runner_cleanup", "worker_start"))
    out["hooks_before"], out["hooks_after"] = f("hooks_before"), f("hooks_after")
    out["protocol"] = max(f("adapter") - f("runner_run"), 0.0)
    # what Runner.run spent outside the job's own marks (hook dispatch, the worker hand-off)
    out["runner_collect"] += max(f("runner_run") - f("hooks_before") - f("hooks_after") - runner_inner, 0.0)
    for k in ("store", "critic", "profile", "knowledge"):
        out[k] = f(k)
    parent = f("adapter") + sum(out[k] for k in ("store", "critic", "profile", "knowledge"))
    out["loop_other"] = max(f("total") - parent, 0.0)
    out["total"] = f("total")
    return out


def non_timing(acc: dict[str, float]) -> float:
    """Everything but the timing rounds and the correctness rounds."""
    return acc["total"] - sum(acc[k] for k in TIMING + CORRECTNESS)


# ---------------------------------------------------------------- instrumentation (parent side)
class Clock:
    """Wall seconds per label, summed; ``wrap`` times a callable into a label."""

    def __init__(self) -> None:
        self.t: dict[str, float] = {}

    def add(self, label: str, seconds: float) -> None:
        self.t[label] = self.t.get(label, 0.0) + seconds

    def wrap(self, label: str, fn):  # type: ignore[no-untyped-def]
        @functools.wraps(fn)
        def timed(*a, **k):  # type: ignore[no-untyped-def]
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.add(label, time.perf_counter() - t0)
        return timed


@contextlib.contextmanager
def instrumented(ctx, clock: Clock, jobs: list[dict]):  # type: ignore[no-untyped-def]
    """Time the loop's collaborators of ``ctx`` into ``clock``; every measurement's phase times
    (and the runner's spawn-to-exit seconds) go to ``jobs``."""
    from arbor.campaign import steps

    saved: list[tuple[object, str, object]] = []

    def patch(owner, name: str, new) -> None:  # type: ignore[no-untyped-def]
        saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, new)

    measure, inside = ctx.target.measure, [False]

    def adapter_measure(runner, source):  # type: ignore[no-untyped-def]
        t0, inside[0] = time.perf_counter(), True
        try:
            result = measure(runner, source)
        finally:
            clock.add("adapter", time.perf_counter() - t0)
            inside[0] = False
        jobs.append({**(result.get("phase_times") or {}), "job_wall": result.get("duration_s") or 0.0})
        return result

    def in_measurement(label: str, fn):  # type: ignore[no-untyped-def]
        """Timed into ``label`` for the measurement's job only (the profile job has its own row)."""
        @functools.wraps(fn)
        def timed(*a, **k):  # type: ignore[no-untyped-def]
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                if inside[0]:
                    clock.add(label, time.perf_counter() - t0)
        return timed

    patch(ctx.target, "measure", adapter_measure)
    patch(ctx.runner, "run", in_measurement("runner_run", ctx.runner.run))
    for hook in ctx.runner.hooks:
        patch(hook, "before", in_measurement("hooks_before", hook.before))
        patch(hook, "after", in_measurement("hooks_after", hook.after))
    patch(ctx.store, "record_measurement", clock.wrap("store", ctx.store.record_measurement))
    patch(ctx.store, "record_verdict", clock.wrap("store", ctx.store.record_verdict))
    patch(ctx.target, "judge", clock.wrap("critic", ctx.target.judge))
    patch(ctx.critic, "narrate", clock.wrap("critic", ctx.critic.narrate))
    patch(steps, "record_profile", clock.wrap("profile", steps.record_profile))
    patch(steps.knowledge, "record_judgement", clock.wrap("knowledge", steps.knowledge.record_judgement))
    try:
        yield
    finally:
        for owner, name, old in reversed(saved):
            if owner is ctx.target or owner is ctx.runner or owner is ctx.store or owner is ctx.critic \
                    or owner in ctx.runner.hooks:
                with contextlib.suppress(AttributeError):
                    delattr(owner, name)  # instance attribute: the class's method shows again
            else:
                setattr(owner, name, old)


# ---------------------------------------------------------------- one campaign, two evaluations
def _spec(workdir: Path, device: str, name: str, docker: bool = False):  # type: ignore[no-untyped-def]
    from arbor.spec.campaign import parse_spec

    data = yaml.safe_load(CAMPAIGN.read_text())
    data["name"] = name
    if docker:  # the host's interpreter in a warm container, a docker exec per job
        data["sandbox"] = {**data.get("sandbox", {}), "kind": "docker", "docker": {"image": "host"}}
    data["target"]["problem"] = str((CAMPAIGN.parent / data["target"]["problem"]).resolve())
    data["target"]["device"] = device
    data["store"] = {"url": f"sqlite:///{workdir / 'arbor.db'}"}
    return parse_spec(data, str(workdir / "campaign.yaml"), workdir)


def _candidate(reference: str) -> str:
    lines = reference.splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith("def forward"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].strip().startswith("return"))
    return "".join(lines[:start + 1] + [CANDIDATE_FORWARD] + lines[end + 1:])


def _evaluate(ctx, node_id: int, measurements: int = 1) -> dict:  # type: ignore[no-untyped-def]
    """The loop's guard, measure and critique steps for ``node_id``, timed; stops after
    ``measurements`` verdicts (a new best's confirmation is another measurement like the first)."""
    from arbor.campaign import steps

    clock, jobs = Clock(), []
    state = {"node_ids": [node_id]}
    t0 = time.perf_counter()
    with instrumented(ctx, clock, jobs):
        steps.guard(ctx, state)
        for _ in range(measurements):
            steps.measure(ctx, state)
            steps.critique(ctx, state)
            if ctx.store.get_node(node_id).state != "queued":
                break
    total = time.perf_counter() - t0
    node = ctx.store.get_node(node_id)
    verdict = ctx.store.verdicts(node_id)[-1]
    return {"total": total, "measurements": jobs, **clock.t, "state": node.state,
            "verdict": f"{verdict.decision} {verdict.diagnosis}".strip(), "speedup": node.speedup}


def campaign_run(mode: str, device: str) -> dict:
    """A fresh campaign context (store, agents, runner) in ``mode``; its baseline evaluation, then
    one candidate's."""
    from arbor.campaign.run import build_context, ensure_root

    os.environ["ARBOR_WARM_WORKER"] = "1" if mode == "warm" else "0"
    with tempfile.TemporaryDirectory(prefix="arbor-eval-overhead-") as tmp:
        spec = _spec(Path(tmp), device, f"eval-overhead-{mode}", docker=mode == "docker")
        from arbor.search_tree import open_store

        store = open_store(spec.store_url())
        t0 = time.perf_counter()
        ctx = build_context(spec, store, lambda kind, payload: None)
        setup_s = time.perf_counter() - t0
        try:
            ensure_root(ctx)
            root = ctx.campaign.root_node_id
            baseline = _evaluate(ctx, root)
            noise_floor = ctx.noise_floor
            source = _candidate(ctx.store.get_artifact(ctx.store.get_node(root).artifact_sha))
            sha = ctx.store.put_artifact(source, ctx.target.artifact_kind)
            node = ctx.store.add_node(ctx.cid, sha, "benchmark", parent_id=root, move_id="fused-functions",
                                      hypothesis="fused tanh-GELU and SiLU")
            candidate = _evaluate(ctx, node.id)
        finally:
            ctx.runner.close()
            store.close()
    return {"mode": mode, "context_setup_s": setup_s, "noise_floor": noise_floor,
            "baseline": baseline, "candidate": candidate}


# ---------------------------------------------------------------- report
def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def summarize(runs: list[dict], modes: list[str]) -> dict:
    """Per mode and evaluation: the median of each row over repetitions, the non-timing cost."""
    out: dict = {}
    for mode in modes:
        mine = [r for r in runs if r["mode"] == mode]
        out[mode] = {}
        for ev in ("baseline", "candidate"):
            accs = [account(r[ev]) for r in mine]
            rows = {k: _median([a[k] for a in accs]) for k in [*(k for k, _ in ROWS), "total"]}
            out[mode][ev] = {"rows": rows, "non_timing_s": _median([non_timing(a) for a in accs]),
                             # the worker's start is once per campaign (per slot), not per evaluation
                             "non_timing_per_evaluation_s": _median([non_timing(a) - a["worker_start"] for a in accs]),
                             "non_timing_all_s": [round(non_timing(a), 3) for a in accs],
                             "totals_s": [round(a["total"], 3) for a in accs],
                             "verdicts": [r[ev]["verdict"] for r in mine]}
        out[mode]["noise_floor"] = [r["noise_floor"] for r in mine]
    return out


def print_table(summary: dict, modes: list[str]) -> None:
    cols = [("row", "phase")]
    for ev in ("baseline", "candidate"):
        for mode in modes:
            cols.append((f"{ev}.{mode}", f"{'A/A' if ev == 'baseline' else 'cand'} {mode}"))
        if "fresh" in modes and "warm" in modes:
            cols.append((f"{ev}.ratio", "warm/fresh"))
    rows = []
    for key, label in [*ROWS, ("total", "total"), ("non_timing", "NON-TIMING (total - rounds - correctness)")]:
        row = {"row": label}
        for ev in ("baseline", "candidate"):
            vals = {}
            for mode in modes:
                s = summary[mode][ev]
                v = s["non_timing_s"] if key == "non_timing" else s["rows"][key]
                row[f"{ev}.{mode}"] = f"{v:.2f}"
                vals[mode] = v
            if "fresh" in vals and "warm" in vals:
                row[f"{ev}.ratio"] = f"{vals['warm'] / vals['fresh']:.2f}" if vals["fresh"] > 0.005 else "-"
        rows.append(row)
    print(table(rows, cols))


def _docker_engine():  # type: ignore[no-untyped-def]
    """$DOCKER_HOST or the system socket, else a private dockerd (as root); returns what to stop."""
    if os.environ.get("DOCKER_HOST") or os.path.exists("/var/run/docker.sock"):
        return None
    from tests.docker_engine import PrivateDockerd

    daemon = PrivateDockerd()
    daemon.start()
    os.environ["DOCKER_HOST"] = daemon.url
    return daemon


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    ap.add_argument("--reps", type=int, default=2, help="campaign runs per mode (default 2)")
    ap.add_argument("--modes", default="fresh,warm", help="fresh,warm (default), one of them, or with docker")
    ap.add_argument("--out", default=None, help="result name under benchmarks/results/ "
                    "(default eval_overhead, eval_overhead_cuda on a GPU)")
    args = ap.parse_args(argv)
    args.out = args.out or ("eval_overhead" if args.device == "cpu" else f"eval_overhead_{args.device.split(':')[0]}")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in ("fresh", "warm", "docker") for m in modes):
        print("--modes: a comma-separated choice of fresh, warm, docker", file=sys.stderr)
        return 2
    started = time.monotonic()
    daemon = _docker_engine() if "docker" in modes else None
    load_start = os.getloadavg()
    runs = []
    from arbor.sandbox.runner import SandboxError

    try:
        for rep in range(args.reps):
            for mode in (modes if rep % 2 == 0 else list(reversed(modes))):  # ABBA: drift hits both
                print(f"rep {rep + 1}/{args.reps}: {mode} ...", file=sys.stderr, flush=True)
                runs.append(campaign_run(mode, args.device))
    except SandboxError as exc:  # e.g. the device does not start inside the sandbox: say why, once
        print(f"eval_overhead: {exc}", file=sys.stderr)
        return 1
    finally:
        if daemon is not None:
            daemon.stop()
    load_end = os.getloadavg()
    summary = summarize(runs, modes)
    print(f"\nOne evaluation of the quickstart ({CAMPAIGN.name}) on {args.device}, median of {args.reps} "
          f"run(s) per mode, seconds; load {load_start[0]:.1f} -> {load_end[0]:.1f} on {os.cpu_count()} cores\n")
    print_table(summary, modes)
    for mode in modes:
        for ev in ("baseline", "candidate"):
            s = summary[mode][ev]
            ok = "meets" if s["non_timing_s"] <= GOAL_S else "misses"
            print(f"{mode:5s} {ev:9s}: non-timing {s['non_timing_s']:.2f} s ({ok} the {GOAL_S:g} s goal; "
                  f"{s['non_timing_per_evaluation_s']:.2f} s without the once-per-campaign worker start), "
                  f"all runs {s['non_timing_all_s']}, verdicts {s['verdicts']}")
        print(f"{mode:5s} A/A noise floor: {[round(x, 4) for x in summary[mode]['noise_floor']]}")
    path = write_result(args.out, {
        "device": args.device, "campaign": str(CAMPAIGN.relative_to(ROOT)), "reps": args.reps, "modes": modes,
        "goal_non_timing_s": GOAL_S, "load_avg_start": [round(x, 2) for x in load_start],
        "load_avg_end": [round(x, 2) for x in load_end], "rows": [list(r) for r in ROWS],
        "summary": summary, "runs": runs}, started)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

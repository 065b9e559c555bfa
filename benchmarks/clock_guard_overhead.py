"""What the clock guard costs per job, against the fake GPUs (tests/sandbox/fakes): the campaign's
one-time settle and verify, then every job's ``before`` and ``after`` hooks.

Scenarios (each: ``start()``, then ``--jobs`` jobs of ``--job-s`` seconds of GPU load):

* ``h100-lock``      — an HBM board, clocks locked, nothing goes wrong: the steady per-job cost;
* ``gddr-lock``      — a GDDR board whose idle memory clock parks low between jobs (P8);
* ``lost-lock``      — the lock is reset by another tool after the second job;
* ``h100-verify``    — ``clocks: verify`` on a card that hits its power cap under load;
* ``smi-lock``       — ``h100-lock`` through the ``nvidia-smi`` fake (every reading a process start).

Columns: per-job hook wall time (``before`` + ``after``, the job itself excluded; a refused job:
what ``before`` spent before refusing), NVML calls (``smi-lock``: nvidia-smi process starts) per
job outside the sampler thread, settles (lock applied, ``settle_s`` waited and verified) after
``start()``, and the jobs the guard refused. ``settle_s`` is the default (3 s) so a settle shows
in the wall time; the fake's load burst costs nothing (a real one starts a torch process).

    python -m benchmarks.clock_guard_overhead [--jobs 6] [--job-s 0.2] [--before OLD.json]

``--before`` embeds the rows of an earlier run (e.g. of the code before a change) in the result.

Writes ``benchmarks/results/clock_guard_overhead.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

from arbor.sandbox.gpu.clocks import ClockGuard, ClockTargets
from arbor.sandbox.gpu.control import ClockError, NvidiaSmiBackend, NvmlBackend
from arbor.sandbox.runner import Job, JobResult
from benchmarks.common import table, write_result
from tests.sandbox.fakes import FakeMachine, fake_pynvml, h100_sxm, install_cli


def _counting(nv: types.ModuleType) -> tuple[types.ModuleType, list]:
    """The NVML shim with every ``nvml*`` function counted (calls from the sampler thread too)."""
    count = [0]
    for name in dir(nv):
        fn = getattr(nv, name)
        if name.startswith("nvml") and callable(fn):
            def wrapped(*a, _fn=fn, **kw):  # type: ignore[no-untyped-def]
                count[0] += 1
                return _fn(*a, **kw)
            setattr(nv, name, wrapped)
    return nv, count


def _scenario(name: str, tmp: Path, jobs: int, job_s: float) -> dict:
    gpu = h100_sxm(0, power_cap_mhz=1500) if name == "h100-verify" else \
        h100_sxm(0, idle_mem_mhz=405) if name == "gddr-lock" else h100_sxm(0)
    m = FakeMachine(tmp / f"{name}.json", [gpu]).save()
    count: list = [0]
    if name == "smi-lock":
        exe = install_cli(tmp / "bin", m, "nvidia-smi")
        factory = lambda: NvidiaSmiBackend(exe)  # noqa: E731
        log = m.path.parent / f"{m.path.name}.log"

        class _Lines(list):  # the fake CLI logs one line per invocation: count[0] reads the log
            def __getitem__(self, i):  # type: ignore[no-untyped-def]
                return len(log.read_text().splitlines()) if log.exists() else 0

        count = _Lines([0])
    else:
        nv, count = _counting(fake_pynvml(m))
        sys.modules["pynvml"] = nv
        factory = NvmlBackend
    notices: list[str] = []
    mode = "verify" if name == "h100-verify" else "lock"
    kw = {"on_notice": notices.append} if "on_notice" in ClockGuard.__dataclass_fields__ else {}
    targets = ClockTargets(1410 if name == "smi-lock" else None, settle_s=3.0)  # the CLI has no TDP id
    g = ClockGuard(mode, "cuda:0", targets, backend_factory=factory, load=m.busy, **kw)
    t0 = time.perf_counter()
    g.start()
    start_s = time.perf_counter() - t0
    settles0 = g.__dict__.get("settles", 1 if mode == "lock" else 0)
    hook_s, calls, refused = [], [], 0
    for i in range(jobs):
        if name == "lost-lock" and i == 2:
            m.refresh()
            m.gpus[0].locked = None  # nvidia-smi -rgc by someone else, or a driver reload
            m.save()
        job, res = Job(["true"], {}, 10), JobResult(0, False, job_s, "", "", {})
        c0, t0 = count[0], time.perf_counter()
        try:
            g.before(job)
        except ClockError:  # a refused job still paid for what the guard tried first
            refused += 1
            hook_s.append(time.perf_counter() - t0)
            calls.append(count[0] - c0)
            continue
        t_before = time.perf_counter() - t0
        c_before = count[0] - c0
        with m.busy():
            time.sleep(job_s)
        c0, t0 = count[0], time.perf_counter()
        g.after(job, res)
        hook_s.append(t_before + time.perf_counter() - t0)
        calls.append(c_before + count[0] - c0)
    settles = g.__dict__.get("settles", settles0) - settles0
    g.close()
    sys.modules.pop("pynvml", None)
    return {"scenario": name, "start_s": round(start_s, 3),
            "hook_ms_median": round(1e3 * statistics.median(hook_s), 2) if hook_s else None,
            "hook_ms_max": round(1e3 * max(hook_s), 2) if hook_s else None,
            "calls_per_job": statistics.median(calls) if calls else None,
            "settles_after_start": settles, "refused_jobs": refused, "notices": len(notices)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--job-s", type=float, default=0.2)
    ap.add_argument("--before", type=Path, default=None, help="an earlier run's result file, kept beside this one")
    args = ap.parse_args(argv)
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("h100-lock", "gddr-lock", "lost-lock", "h100-verify", "smi-lock"):
            rows.append(_scenario(name, Path(tmp), args.jobs, args.job_s))
            print(f"  {name}: done", file=sys.stderr)
    print(table(rows, [("scenario", "scenario"), ("start_s", "start s"), ("hook_ms_median", "per-job ms"),
                       ("hook_ms_max", "max ms"), ("calls_per_job", "calls/job"),
                       ("settles_after_start", "settles"), ("refused_jobs", "refused"), ("notices", "notices")]))
    data: dict = {"jobs": args.jobs, "job_s": args.job_s, "rows": rows}
    if args.before is not None:
        old = json.loads(args.before.read_text())
        data["before"] = {"machine": old.get("machine"), "rows": old.get("rows")}
    path = write_result("clock_guard_overhead", data, started)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

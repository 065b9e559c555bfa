"""Speed of light of the ReLU baseline: does its profile read what one core can stream?

Issue 28: the baseline profile of ``l1_01_relu`` read ``aten::clamp_min 4.307 ms (5% of peak
bandwidth)`` and ``aten::relu 0.016 ms (1313% of peak bandwidth)`` — a cache-sized all-core copy
rate as the peak, and the parent op credited with its child's bytes. This runs what a campaign
runs: the suite's size calibration (one thread), the baseline's A/A measurement (which measures and
caches this machine's peaks at one thread and at every allowed core), then the bottleneck profile
read against the one-thread peaks, ``--repeats`` times. Goal: every op at most 100%, and the
dominant op at >= 50% of the one-thread stream rate. It also prints the reference's position: both
bounds (memory; compute, transcendentals at the measured vector rates), which one binds, and
``left``, the lower headroom (``--problem benchmarks/problems_single_ops/l1_51_gelu_erf.py``: an
erf-bound one).

    python -m benchmarks.speed_of_light                      # calibrated size, 3 profiles
    python -m benchmarks.speed_of_light --scale 2.0 --repeats 5

Writes ``benchmarks/results/speed_of_light.json`` (with the load average: on a busy machine the
measurement's CPU-time clock holds, the profile is scaled to it, readings can only fall).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks.common import ROOT, fmt, table, write_result

PROBLEM = ROOT / "benchmarks" / "problems" / "l1_01_relu.py"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default=str(PROBLEM))
    ap.add_argument("--scale", type=float, help="size_scale (default: the suite's calibration)")
    ap.add_argument("--time-target-ms", type=float, default=20.0, help="the suite's calibration target")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="speed_of_light")
    args = ap.parse_args(argv)
    started = time.monotonic()

    from arbor.agents.transforms import to_modelnew
    from arbor.campaign.speed_of_light import from_measurement
    from arbor.sandbox.gpu import bandwidth_at
    from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernel
    from arbor.sandbox.kernel.profile_job import run_profile
    from arbor.sandbox.runner import make_runner
    from arbor.suite.calibrate import calibrate

    path = Path(args.problem)
    calib = None
    if args.scale is None:
        calib = calibrate(path, args.time_target_ms)
        args.scale = calib["scale"]
    src = path.read_text()
    req = KernelRequest(problem_source=src, candidate_source=to_modelnew(src), num_threads=1, size_scale=args.scale,
                        mode="aa", time_budget_s=1.0)
    runner = make_runner("local")
    rows, runs = [], []
    try:
        m = measure_kernel(runner, req)
        if not m.ok:
            print(f"the baseline measurement failed: {m.error_class}: {m.error_text}", file=sys.stderr)
            return 1
        peak = m.stats["sol_peak"]
        stream = bandwidth_at(peak, float("inf"))
        pos = from_measurement(m.stats, m.fingerprint, statistics.median(m.baseline_samples))
        for i in range(args.repeats):
            p = run_profile(runner, req, peak, statistics.median(m.candidate_samples))
            if p.get("error"):
                print(f"profile {i + 1} failed: {p['error']}", file=sys.stderr)
                return 1
            runs.append(p)
            for o in p["ops"]:
                if not o.get("bytes"):
                    continue
                rate = o["bytes"] / (o["self_ms"] / 1e3)
                rows.append({"run": i + 1, "op": o["op"], "self_ms": o["self_ms"], "mb": o["bytes"] / 1e6,
                             "gbs": rate / 1e9, "of_stream": rate / stream, "shown": o.get("bytes_frac_peak"),
                             "peak_gbs": (o.get("peak_bytes_per_s") or 0) / 1e9})
    finally:
        runner.close()
    print(f"{path.name} at size_scale {args.scale:g}, one thread; one-thread stream {stream / 1e9:.3g} GB/s "
          f"({peak.get('source')}); reference {statistics.median(m.baseline_samples) * 1e3:.3f} ms per call, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(table([{**r, "of_stream": f"{r['of_stream']:.0%}", "shown": "BUG" if r["shown"] is None else f"{r['shown']:.0%}"}
                 for r in rows],
                [("run", "run"), ("op", "op"), ("self_ms", "self ms"), ("mb", "MB moved"), ("gbs", "GB/s"),
                 ("peak_gbs", "peak at its working set GB/s"), ("shown", "% shown"), ("of_stream", "% of stream")]))
    dominant = [r for r in rows if r["op"] == "aten::clamp_min"]
    best = max((r["of_stream"] for r in dominant), default=0.0)
    med = statistics.median(r["of_stream"] for r in dominant) if dominant else 0.0
    bugs = [a for p in runs for a in p.get("anomalies") or []]
    above = [r for r in rows if r["shown"] is None or r["shown"] > 1.0]
    if pos is not None:
        shown, note = pos.reading(pos.reference_s)
        print(f"reference at {fmt(100 * shown if shown is not None else None, 0)}% of its speed of light "
              f"({pos.describe()}){' — ' + note if note else ''}")
        print(f"left: {pos.left:.2f}x, the lower of the memory bound's {pos.reference_s / pos.memory_s:.2f}x and the "
              f"compute bound's {pos.reference_s / pos.compute_s:.2f}x ({pos.bound} binds)"
              if pos.left and pos.memory_s and pos.compute_s else f"left: {fmt(pos.left, 2)}x ({pos.bound} binds)")
    print(f"aten::clamp_min reads {med:.0%} (median) / {best:.0%} (best) of the one-thread stream rate (goal >= 50%); "
          f"ops above 100%: {len(above)}; reported as bugs: {len(bugs)}")
    path_out = write_result(args.out, {
        "problem": path.name, "scale": args.scale, "calibration": calib, "peak": peak,
        "stream_bytes_per_s": stream, "reference_s": statistics.median(m.baseline_samples),
        "position": pos.to_dict() if pos else None, "rows": rows, "anomalies": bugs,
        "clamp_min_of_stream_median": med, "clamp_min_of_stream_best": best,
        "ops_above_100": len(above), "load_avg_at_end": list(os.getloadavg())}, started)
    print(f"wrote {path_out}")
    return 0 if not above and not bugs else 1


if __name__ == "__main__":
    sys.exit(main())

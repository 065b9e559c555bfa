"""Schedule points of the generated C++ kernel against the torch op, side by side in one process.

Why: a campaign measures one point at a time, each in its own build and process, and on a loaded
2-core VM the ratio between two points is lost in the noise between runs. Here the generated
ReLU and softmax (the benchmark problems' shapes at their calibrated size, ~9.4 MB a tensor) are
built at several schedule points in ONE extension (each point in its own namespace, as
``tests/agents/test_cpp_schedule.py`` builds them), checked against torch, and timed interleaved
with the torch op on one thread, so every ratio is measured under the same load.

    python -m benchmarks.cpp_schedule_points          # ~5-10 min on 2 cores (one build)

Writes ``benchmarks/results/cpp_schedule_points.json`` with the machine and its load.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks.common import ROOT, write_result

POINTS = {"relu": ({}, {"unroll": 1}, {"block": 4096}, {"block": 4096, "stream": 1}),
          "softmax": ({}, {"unroll": 1}, {"block": 4096}, {"block": 4096, "stream": 1})}
SHAPES = {"relu": (144, 16384), "softmax": (54, 32768)}
PROBLEMS = {"relu": "l1_01_relu.py", "softmax": "l1_06_softmax.py"}


def main() -> int:
    import torch
    from torch.utils.cpp_extension import load_inline

    from arbor.agents.transforms import apply_move, to_modelnew
    from arbor.agents.transforms.cpp import generate
    from arbor.agents.transforms.cpp.schedule import kernel_of
    from arbor.agents.transforms.cpp.source import FLAGS

    sys.path.insert(0, str(ROOT / "tests" / "agents"))
    from test_cpp_schedule import _combined  # the test's one-extension builder

    torch.set_num_threads(1)
    started, load0 = time.monotonic(), os.getloadavg()
    names, kernels = [], []
    for op, points in POINTS.items():
        base = generate(to_modelnew((ROOT / "benchmarks" / "problems" / PROBLEMS[op]).read_text()))
        for p in points:
            names.append((op, p))
            kernels.append(kernel_of(base if not p else apply_move(base, "cpp_schedule", p)))
    ext = load_inline("arbor_bench_sched_points", cpp_sources=_combined(kernels),
                      functions=[f"k{i}" for i in range(len(kernels))], extra_cflags=list(FLAGS))
    xs = {op: torch.randn(*SHAPES[op]) for op in POINTS}
    ref = {"relu": torch.relu, "softmax": lambda x: torch.softmax(x, 1)}

    def call(i: int, op: str) -> torch.Tensor:
        x = xs[op]
        o = torch.empty_like(x)
        sizes = (x.shape[1], x.shape[0]) if op == "softmax" else (x.numel(),)
        getattr(ext, f"k{i}")(o, x, *sizes)
        return o

    fns = {}
    for op in POINTS:
        fns[(op, "torch")] = lambda op=op: ref[op](xs[op])
        for i, (o, p) in enumerate(names):
            if o == op:
                torch.testing.assert_close(call(i, op), ref[op](xs[op]), rtol=1e-4, atol=1e-5)
                fns[(op, str(p or "default"))] = lambda i=i, op=op: call(i, op)
    times = {k: [] for k in fns}
    with torch.no_grad():
        for _ in range(40):
            for k, f in fns.items():
                t0 = time.perf_counter()
                f()
                times[k].append(time.perf_counter() - t0)
    rows = []
    for (op, point), ts in times.items():
        med, base = statistics.median(ts), statistics.median(times[(op, "torch")])
        rows.append({"op": op, "point": point, "median_ms": round(med * 1e3, 3), "vs_torch": round(base / med, 3)})
        print(f"{op:8s} {point:32s} {med * 1e3:8.3f} ms  {base / med:5.2f}x torch")
    load1 = os.getloadavg()
    print(f"load average at start {[round(x, 2) for x in load0]}, at end {[round(x, 2) for x in load1]}")
    print(f"written {write_result('cpp_schedule_points', {'rows': rows, 'load_avg_end': load1}, started)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

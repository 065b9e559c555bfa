"""Schedule points of the generated C++ kernel against the torch op, side by side in one process,
measured the way a campaign's harness measures.

Why: a campaign measures one point at a time, each in its own build and process, and on a loaded
2-core VM the ratio between two points is lost in the noise between runs. Here the generated
softmax, log-softmax, exact-erf GELU, ReLU (1-2.4M elements) and the two norms (LayerNorm over
4 MB rows, RMSNorm; the benchmark problems' shapes) are built at several schedule points in ONE
extension (each point in its own namespace, as ``tests/agents/test_cpp_schedule.py`` builds them), checked against torch, and timed interleaved
with the torch op on one thread, so every ratio is measured under the same load.

As the harness does (``sandbox/harness/kernel_harness.py``): the host allocator pinned (no
``mmap``, no trim: ``sandbox/harness/allocator.py``), so outputs are reused rather than faulted in,
and every call takes the next input of a pool of 128 MB, so inputs come from memory, not from a
cache the previous call filled. (Without both, an earlier version read ReLU at 5.65x torch at
load 9-13, where campaigns read ~1.0x; with both, 1.07-1.29x on a core of its own. Likely causes,
not isolated: one input reused from the 32 MB L3, and outputs faulted in or not by the unpinned
allocator depending on the order of earlier allocations.)

    python -m benchmarks.cpp_schedule_points --build-only   # the build (run it on a build core)
    taskset -c 0 python -m benchmarks.cpp_schedule_points   # the timing (the cached build)

Writes ``benchmarks/results/cpp_schedule_points.json`` with the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from benchmarks.common import ROOT, write_result
from arbor.sandbox.harness import allocator

POINTS = {
    "softmax": ({"lanes": 0}, {}, {"lanes": 32}, {"unroll": 1, "lanes": 32}, {"block": 4096}),
    "log_softmax": ({"lanes": 0}, {}, {"lanes": 32}, {"lanes": 32, "block": 4096, "stream": 1}),
    "gelu_erf": ({"erf": 0}, {}, {"block": 4096, "stream": 1}),
    "relu": ({}, {"block": 1024, "stream": 1}, {"block": 4096, "stream": 1}, {"block": 4096}),
    "layernorm": ({"onepass": 0}, {}, {"lanes": 32}, {"block": 1024, "stream": 1}),
    "rmsnorm": ({}, {"lanes": 32}, {"block": 1024, "stream": 1}, {"block": 1024, "stream": 1, "lanes": 32}),
}
SHAPES = {"softmax": (67, 17121), "log_softmax": (96, 24576), "gelu_erf": (244, 8192), "relu": (144, 16384),
          "layernorm": (16, 64 * 128 * 128), "rmsnorm": (1024, 4096)}  # rows, row length
PROBLEMS = {"softmax": "problems/l1_06_softmax.py", "log_softmax": "problems/l1_19_log_softmax.py",
            "gelu_erf": "problems_single_ops/l1_51_gelu_erf.py", "relu": "problems/l1_01_relu.py",
            "layernorm": "problems/l1_05_layernorm.py", "rmsnorm": "problems_single_ops/l1_52_rmsnorm.py"}
NORMS = ("layernorm", "rmsnorm")  # kernels reading a weight (and LayerNorm a bias) beside the input
POOL_BYTES = 128 << 20  # the harness's CPU timing pool per side


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-only", action="store_true", help="build the extension and stop")
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args(argv)
    pinned = allocator.pin()  # before torch allocates anything
    import torch
    from torch.utils.cpp_extension import load_inline

    from arbor.agents.transforms import apply_move, to_modelnew
    from arbor.agents.transforms.cpp import generate
    from arbor.agents.transforms.cpp.schedule import kernel_of
    from arbor.agents.transforms.cpp.source import FLAGS

    from tests.agents.cpp_combined import combined_source  # the tests' one-extension builder

    torch.set_num_threads(1)
    started, load0 = time.monotonic(), os.getloadavg()
    names, kernels = [], []
    for op, points in POINTS.items():
        base = generate(to_modelnew((ROOT / "benchmarks" / PROBLEMS[op]).read_text()))
        for p in points:
            names.append((op, p))
            moved = apply_move(base, "cpp_schedule", p) if p else base
            kernels.append(kernel_of(moved if moved is not None else base))
    ext = load_inline("arbor_bench_sched_points", cpp_sources=combined_source(kernels),
                      functions=[f"k{i}" for i in range(len(kernels))], extra_cflags=list(FLAGS))
    if args.build_only:
        return 0
    torch.manual_seed(0)
    pools = {op: [torch.randn(*s) for _ in range(max(1, POOL_BYTES // (4 * s[0] * s[1])))] for op, s in SHAPES.items()}
    turn = {op: 0 for op in POINTS}
    ref = {"relu": torch.relu, "softmax": lambda x: torch.softmax(x, 1), "log_softmax": lambda x: torch.log_softmax(x, 1),
           "gelu_erf": torch.nn.functional.gelu}
    weight = {op: torch.randn(SHAPES[op][1]) * 0.1 + 1.0 for op in NORMS}
    bias = torch.randn(SHAPES["layernorm"][1]) * 0.1
    ref["layernorm"] = lambda x: torch.nn.functional.layer_norm(x, (x.shape[1],), weight["layernorm"], bias)
    ref["rmsnorm"] = lambda x: torch.nn.functional.rms_norm(x, (x.shape[1],), weight["rmsnorm"], eps=1e-6)

    def nxt(op: str) -> torch.Tensor:
        turn[op] = (turn[op] + 1) % len(pools[op])
        return pools[op][turn[op]]

    def call(i: int, op: str, x: torch.Tensor) -> torch.Tensor:
        o = torch.empty_like(x)
        sizes = (x.shape[1], x.shape[0]) if "softmax" in op or op in NORMS else (x.numel(),)
        extra = (weight[op],) + ((bias,) if op == "layernorm" else ()) if op in NORMS else ()
        getattr(ext, f"k{i}")(o, x, *extra, *sizes)
        return o

    fns = {}
    for op in POINTS:
        fns[(op, "torch")] = lambda op=op: ref[op](nxt(op))
        for i, (o, p) in enumerate(names):
            if o == op:
                x = pools[op][0]
                torch.testing.assert_close(call(i, op, x), ref[op](x), rtol=1e-4, atol=1e-5)
                fns[(op, str(p or "default"))] = lambda i=i, op=op: call(i, op, nxt(op))
    times = {k: [] for k in fns}
    with torch.no_grad():
        for _ in range(args.rounds):
            for k, f in fns.items():
                t0 = time.perf_counter()
                f()
                times[k].append(time.perf_counter() - t0)
    rows = []
    for (op, point), ts in times.items():
        med, base = statistics.median(ts), statistics.median(times[(op, "torch")])
        rows.append({"op": op, "point": point, "median_ms": round(med * 1e3, 3), "vs_torch": round(base / med, 3)})
        print(f"{op:12s} {point:44s} {med * 1e3:8.3f} ms  {base / med:5.2f}x torch")
    load1 = os.getloadavg()
    print(f"load average at start {[round(x, 2) for x in load0]}, at end {[round(x, 2) for x in load1]}")
    out = {"rows": rows, "shapes": SHAPES, "allocator": pinned, "pool_bytes": POOL_BYTES, "load_avg_end": load1,
           "affinity": sorted(os.sched_getaffinity(0))}
    print(f"written {write_result('cpp_schedule_points', out, started)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

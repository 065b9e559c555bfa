"""Schedule points of a problem's generated C++ kernel against eager and torch.compile, interleaved.

Why: a campaign measures one candidate at a time, and at a budget of three it meets the kernel's
default point and perhaps one more; which point a kernel should start at (``schedule.DEFAULTS``,
``MODE_DEFAULTS``) is decided here, on the problem's own module and shapes, every side timed in
the same rounds under the same load. As the harness measures (``sandbox/harness/kernel_harness.py``):
the host allocator pinned, one thread, and every call takes the next input of a pool of
``--pool-mb`` so inputs come from memory, not from a cache the previous call filled. Each point's
output is checked against the reference (``rtol = atol = 1e-4``, the campaign's float32 tolerance).

    taskset -c 0 python -m benchmarks.points_vs_compile benchmarks/problems/l1_20_layernorm_manual.py
    taskset -c 0 python -m benchmarks.points_vs_compile benchmarks/problems/l1_07_rmsnorm_manual.py \\
        --point 'unroll=1' --point 'block=1024,prefetch=1024'
    taskset -c 0 python -m benchmarks.points_vs_compile benchmarks/problems/l1_20_layernorm_manual.py --scale 1.1908

Writes ``benchmarks/results/points_vs_compile_<problem>[_s<scale>].json`` with the machine and its load.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

from arbor.sandbox.harness import allocator
from benchmarks.common import write_result


def parse_point(text: str) -> dict:
    """``unroll=1,block=1024`` -> {"unroll": 1, "block": 1024}; ``default`` -> {}."""
    if text in ("", "default"):
        return {}
    out = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        if not value.strip().lstrip("-").isdigit():
            raise SystemExit(f"error: a point is knob=integer pairs joined by commas, got {text!r}")
        out[key.strip()] = int(value)
    return out


def _load(name: str, text: str, folder: Path):  # type: ignore[no-untyped-def]
    path = folder / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problem", type=Path, help="a KernelBench-style problem file (Model, get_inputs, get_init_inputs)")
    ap.add_argument("--point", action="append", default=None,
                    help="a schedule point, knob=value,... (repeatable; the kernel's default point always runs)")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--pool-mb", type=int, default=128)
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--scale", type=float, default=None,
                    help="scale the problem's sizes as the suite does (its calibrated size_scale, e.g. 1.19)")
    args = ap.parse_args(argv)
    if not args.problem.is_file():
        print(f"error: no problem file at {args.problem}: pass the path of a KernelBench-style module", file=sys.stderr)
        return 2
    pinned = allocator.pin()  # before torch allocates anything: pinned late, LayerNorm's kernel read 2.1 ms, not 1.4
    from arbor.agents.transforms import apply_move, to_modelnew
    from arbor.agents.transforms.cpp import generate
    from arbor.agents.transforms.cpp.schedule import kernel_of, read
    from arbor.agents.transforms.triton.plan import Unsupported

    ref_src = args.problem.read_text()
    try:
        base = generate(to_modelnew(ref_src))
    except Unsupported as exc:
        print(f"error: {args.problem.name} has no generated C++ kernel (cpp_codegen does not apply: {exc})",
              file=sys.stderr)
        return 2
    import tempfile

    import torch

    torch.set_num_threads(1)
    started, load0 = time.monotonic(), os.getloadavg()
    points = {"default": {}} | {p: parse_point(p) for p in (args.point or [])}
    folder = Path(tempfile.mkdtemp(prefix="arbor_points_"))
    ref = _load("ref_problem", ref_src, folder)
    if args.scale is not None:  # every module-level int >= 16, as `arbor suite` scales a problem
        from arbor.sandbox.harness.problem_sizes import apply_sizes

        print(f"sizes at scale {args.scale}: {apply_sizes(ref, {}, args.scale)}")
    torch.manual_seed(0)
    init = ref.get_init_inputs()
    model = ref.Model(*init)
    sides = {"eager": model}
    if not args.no_compile:
        twin = ref.Model(*init)
        twin.load_state_dict(model.state_dict())
        sides["compile"] = torch.compile(twin)
    at = {}
    for i, (label, p) in enumerate(points.items()):
        src = apply_move(base, "cpp_schedule", p) if p else base
        if src is None:
            print(f"error: point {label!r} is not one this kernel offers (a knob it does not read, or its default)",
                  file=sys.stderr)
            return 2
        at[label] = read(kernel_of(src))[1]
        cand = _load(f"cand_{i}", src, folder).ModelNew(*init)
        cand.load_state_dict(model.state_dict(), strict=False)
        sides[label] = cand
    inputs = ref.get_inputs()
    per_call = sum(t.numel() * t.element_size() for t in inputs)
    pool = [[t.clone().normal_() if t.is_floating_point() else t for t in inputs]
            for _ in range(max(2, args.pool_mb * 2**20 // max(per_call, 1)))]
    times: dict[str, list[float]] = {k: [] for k in sides}
    turn = 0
    with torch.no_grad():
        want = model(*pool[0])
        for k, f in sides.items():
            torch.testing.assert_close(f(*pool[0]), want, rtol=1e-4, atol=1e-4, msg=lambda m, k=k: f"{k}: {m}")
            for _ in range(3):
                f(*pool[0])
        for _ in range(args.rounds):
            for k, f in sides.items():
                turn = (turn + 1) % len(pool)
                x = pool[turn]
                t0 = time.perf_counter()
                f(*x)
                times[k].append(time.perf_counter() - t0)
    eager = statistics.median(times["eager"])
    best_torch = min(statistics.median(times[k]) for k in ("eager", "compile") if k in times)
    rows = []
    for k, ts in times.items():
        med = statistics.median(ts)
        rows.append({"side": k, "point": at.get(k), "median_ms": round(med * 1e3, 3), "vs_eager": round(eager / med, 3),
                     "vs_best_torch": round(best_torch / med, 3)})
        print(f"{k:36s} {med * 1e3:8.3f} ms  {eager / med:5.2f}x eager  {best_torch / med:5.2f}x best of eager/compile")
    load1 = os.getloadavg()
    print(f"load average at start {[round(x, 2) for x in load0]}, at end {[round(x, 2) for x in load1]}")
    out = {"problem": str(args.problem), "scale": args.scale, "rows": rows, "rounds": args.rounds, "pool_mb": args.pool_mb,
           "allocator": pinned, "load_avg_start": load0, "load_avg_end": load1,
           "affinity": sorted(os.sched_getaffinity(0))}
    print(f"written {write_result(f'points_vs_compile_{args.problem.stem}' + (f'_s{args.scale:g}' if args.scale else ''), out, started)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a problem must cost at least: bytes moved and FLOPs of the reference, and (on CPU) the
machine's peak rates measured by a micro-benchmark. The Critic divides one by the other to get a
speed-of-light time no honest candidate can beat (reward hack #12 in docs/integrity.md#reward-hacks).

Standalone (stdlib + torch): shipped beside the harness and loaded by path. The micro-benchmark
runs before any candidate code is imported and is cached by the host (sandbox/gpu/devices.py), so a
campaign pays for it once per machine and thread count.
"""

from __future__ import annotations

import time

import torch

_perf = time.perf_counter


def _nbytes(xs) -> int:  # type: ignore[no-untyped-def]
    items = xs if isinstance(xs, (list, tuple)) else [xs]
    return sum(t.numel() * t.element_size() for t in items if isinstance(t, torch.Tensor))


def _flops(model, xs: list) -> int | None:  # type: ignore[no-untyped-def]
    """FLOPs of one reference call from the autograd profiler's shape-based estimates (matmuls,
    convolutions, a few elementwise ops). Not FlopCounterMode: any dispatch mode makes torch import
    dynamo, two seconds per measurement. Nested ops are counted once, at the outermost estimate."""
    from torch.autograd import profiler  # noqa: PLC0415

    with profiler.profile(with_flops=True) as prof:
        model(*xs)
    total = 0
    for e in prof.function_events:
        parent, counted = e.cpu_parent, False
        while parent is not None and not counted:
            counted, parent = bool(parent.flops), parent.cpu_parent
        if e.flops and not counted:
            total += int(e.flops)
    return total


def reference_cost(model, xs: list, outs) -> dict:  # type: ignore[no-untyped-def]
    """Bytes every implementation must touch (inputs read once, outputs written once; weights not
    counted, which keeps the floor conservative) and FLOPs of the reference."""
    try:
        flops = _flops(model, xs)
    except Exception:  # noqa: BLE001  an op the profiler cannot follow: bytes alone still bound it
        flops = None
    first = next((t for t in (outs if isinstance(outs, (list, tuple)) else [outs])
                  if isinstance(t, torch.Tensor)), None)
    return {"bytes": _nbytes(xs) + _nbytes(outs), "flops": flops,
            "dtype": str(first.dtype).replace("torch.", "") if first is not None else None}


def _best(fn, reps: int, trials: int = 3) -> float:  # type: ignore[no-untyped-def]
    fn()
    best = float("inf")
    for _ in range(trials):
        t0 = _perf()
        for _ in range(reps):
            fn()
        best = min(best, (_perf() - t0) / reps)
    return max(best, 1e-9)


def measure_cpu_peak(threads: int) -> dict:
    """Best copy bandwidth over cache-resident to DRAM-sized buffers and best GEMM rate in fp32
    and bf16, on every core the sandbox allows: the *highest* rates are wanted, so that the floor
    derived from them errs on the side of never flagging an honest candidate."""
    old = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    try:
        bw = 0.0
        for nbytes in (1 << 15, 1 << 17, 1 << 19, 1 << 21, 1 << 23):
            a = torch.ones(nbytes // 4)
            b = torch.empty_like(a)
            reps = max(2, min(400, int(4e7 // nbytes)))
            bw = max(bw, 2 * nbytes / _best(lambda: b.copy_(a), reps))
        flops = 0.0
        for dtype, n in ((torch.float32, 384), (torch.bfloat16, 256)):
            m = torch.randn(n, n).to(dtype)
            flops = max(flops, 2 * n ** 3 / _best(lambda: torch.mm(m, m), 3))
    finally:
        torch.set_num_threads(old)
    return {"flops_per_s": flops, "bytes_per_s": bw, "threads": threads, "source": "measured"}

"""Bottleneck profile of one candidate, run inside the sandbox like the measurement harness.

Builds ModelNew exactly as the harness does (same seed, sizes, dtype, threads, no grad), warms it
up (compiled candidates compile here), then records a few calls with torch.autograd's profiler and writes
``profile.json``: per operator and input shapes, the calls, self time, and the bytes and FLOPs of
its *own* work. Profiler events nest (``aten::relu`` runs inside itself an ``aten::clamp_min`` that
does the work), so each event's bytes (tensor inputs read, allocations written: ``cost.op_bytes``)
and FLOPs (the profiler's estimates, else ``op_math.py``'s per-element table, whose transcendental
evaluations are kept per op too) are split over the call tree (``cost.attribute``): a parent
keeps only what its children do not account for, as its self time does. Nothing here judges the
candidate; it only says where the time goes.
"""

from __future__ import annotations

import collections
import gc
import importlib.util
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I drops the script's folder
import problem_sizes as sizes  # noqa: E402  (shipped next to this file)

cost = None  # cost.py, loaded by path once the allocator is pinned (it imports torch)


def _load(name: str, path: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


_RUNTIME = ("cuda", "cu", "hip", "nccl")  # driver/runtime calls: their device time belongs to the op that made them


def _is_op(e, cuda: bool) -> bool:  # type: ignore[no-untyped-def]
    """An operator event of the host-side call tree: not a device kernel record, not an async or
    ``[memory]`` record, and on a GPU not a runtime call (``cudaLaunchKernel``), whose kernels'
    time is its caller's."""
    if e.name.startswith("[") or getattr(e, "is_async", False) or not str(e.device_type).endswith("CPU"):
        return False
    return not (cuda and "::" not in e.name and e.name.startswith(_RUNTIME))


def aggregate(events: list, cuda: bool, iters: int, default_size: int = 4) -> list[dict]:
    """Per (operator, input shapes): calls and self time per model call, and the self bytes and
    FLOPs (``cost.attribute``) per model call; ``footprint`` is the largest working set one call of
    it touched (inclusive), which picks the bandwidth it is read against. On a GPU an op's self time
    is the device time of the kernels it launched itself (its inclusive device time less its op
    children's)."""
    events = [e for e in events if _is_op(e, cuda)]
    pos = {id(e): i for i, e in enumerate(events)}
    own, math = [], []
    for e in events:
        alloc = (max(0, int(getattr(e, "cpu_memory_usage", 0) or 0))
                 + max(0, int(getattr(e, "device_memory_usage", 0) or 0)))
        b = cost.op_bytes(e.name, e.input_shapes, getattr(e, "input_dtypes", None), alloc, default_size)
        flops, fns = cost._op_math.op_math(e.name, e.input_shapes, getattr(e, "concrete_inputs", None))
        own.append((float(b), float(e.flops or flops)))  # the profiler's estimate where it has one
        math.append(fns)
    kids = [[pos[id(c)] for c in e.cpu_children if id(c) in pos] for e in events]
    mine = cost.attribute(own, kids)
    # transcendentals belong to the innermost op that counts them (softmax's are _softmax's)
    math = [{} if any(math[c] for c in kids[i]) else m for i, m in enumerate(math)]
    groups: dict = {}
    for i, e in enumerate(events):
        if cuda:
            self_us = e.device_time_total - sum(events[c].device_time_total for c in kids[i])
        else:
            self_us = e.self_cpu_time_total
        shapes = [list(s) for s in (e.input_shapes or []) if isinstance(s, (list, tuple))][:4]
        g = groups.setdefault((e.name, json.dumps(shapes)), {"name": e.name, "shapes": shapes, "count": 0,
                                                              "self_us": 0.0, "bytes": 0.0, "flops": 0.0,
                                                              "footprint": 0.0, "math": {}})
        g["count"] += 1
        g["self_us"] += max(0.0, float(self_us or 0))
        g["bytes"] += mine[i][0]
        g["flops"] += mine[i][1]
        cost._op_math.add_counts(g["math"], math[i])
        g["footprint"] = max(g["footprint"], own[i][0])
    ops = []
    for g in groups.values():
        if g["self_us"] <= 0:
            continue
        ops.append({"name": g["name"], "calls": g["count"] // iters or 1, "self_us": g["self_us"] / iters,
                    "shapes": g["shapes"], "flops": g["flops"] / iters or None,
                    "bytes": g["bytes"] / iters or None, "footprint": g["footprint"] or None,
                    "transcendentals": {k: v / iters for k, v in g["math"].items()} or None})
    return ops


_WARM: dict = {}


def warm() -> None:
    """What every profile needs before it reads its request, once per process: the allocator
    pinned, torch and its autograd profiler imported. A warm worker (sandbox/runners/warm_worker.py) calls
    it once and forks a child per profile. No tensor op, no profiler session: no thread is left."""
    if _WARM:
        return
    _load("arbor_harness_allocator", os.path.join(os.path.dirname(os.path.abspath(__file__)), "allocator.py")).pin()
    import torch  # after pinning the allocator: profiles see the costs the harness times
    from torch.autograd import DeviceType, profiler  # noqa: F401
    global cost
    cost = _load("arbor_harness_cost", os.path.join(os.path.dirname(os.path.abspath(__file__)), "cost.py"))

    gc.freeze()  # torch's objects out of the collector's sight (as the measurement harness does)
    _WARM["torch"] = torch


def main(argv: list[str]) -> int:
    warm()
    torch = _WARM["torch"]
    # torch.autograd's profiler, not torch.profiler's wrapper around it: that one's start imports
    # torch._inductor and torch._dynamo (3-5 s on a loaded 2-core machine, per profile job)
    from torch.autograd import DeviceType, profiler

    request_path = argv[1]
    wire = _load("arbor_harness_request", os.path.join(os.path.dirname(os.path.abspath(__file__)), "request.py"))
    req = wire.ProfileRequest.from_dict(json.loads(open(request_path).read()))  # strict: see request.py
    # a compiled candidate's artifacts from its measurements: loaded, not compiled again (read
    # only: nothing is packed back). Inductor and Triton read their folders when the candidate
    # first imports them, which is after this.
    cache = _load("arbor_harness_compile_cache", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                             "compile_cache.py")).JobCache.start(req)
    if req.num_threads:
        torch.set_num_threads(int(req.num_threads))
    device = torch.device(req.device or "cpu")
    dtype = getattr(torch, req.dtype) if req.dtype else None
    problem = _load("arbor_problem", req.problem_file)
    sizes.apply_sizes(problem, req.sizes or {}, req.size_scale)
    torch.manual_seed(0)
    init = list(problem.get_init_inputs())
    cand = _load("arbor_candidate", req.candidate_file)
    torch.manual_seed(0)
    model = cand.ModelNew(*init)
    model = model.to(device, dtype) if dtype else model.to(device)
    torch.manual_seed(0)
    xs = [x.to(device, dtype) if dtype is not None and isinstance(x, torch.Tensor) and x.is_floating_point()
          else (x.to(device) if isinstance(x, torch.Tensor) else x) for x in problem.get_inputs()]
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    # The last outputs stay alive across calls, as the measurement harness's do (spot checks, its
    # input pool): a freed output at the top of the heap goes back to the kernel and faults in
    # again on the next call (a 69 MB ReLU: 35 ms of page faults, 7 ms without), which the
    # measured steady state does not pay.
    keep: collections.deque = collections.deque(maxlen=2)
    with torch.no_grad():
        for _ in range(3):
            keep.append(model(*xs))
        sync()
        t0 = time.perf_counter()
        keep.append(model(*xs))
        sync()
        one = time.perf_counter() - t0
        iters = max(1, min(int(req.iters), int(float(req.budget_s) / max(one, 1e-6))))
        wall0, cpu0 = time.perf_counter(), time.thread_time()
        with profiler.profile(use_device="cuda" if cuda else None, use_kineto=True, record_shapes=True,
                              with_flops=True, profile_memory=True) as prof:
            for _ in range(iters):
                keep.append(model(*xs))
            sync()
        wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
    events = list(prof.function_events)
    launches = device_us = 0.0  # what ran on the GPU itself (kernels, copies), per call
    for e in events:
        if cuda and e.device_type != DeviceType.CPU:
            launches += 1 / iters
            device_us += float(e.device_time_total or 0) / iters
    size = torch.empty(0, dtype=dtype).element_size() if dtype is not None else 4
    ops = aggregate(events, cuda, iters, size)
    # One-thread CPU work is timed on the thread's CPU time by the measurement harness; the
    # profiler's clock is the wall, which other processes' load stretches. Self times are scaled by
    # the thread's CPU/wall ratio over the profiled calls (preemption falls on ops in proportion to
    # their time), so an op's rate is read on the clock its measurement was.
    scale = min(1.0, cpu / wall) if not cuda and torch.get_num_threads() == 1 and wall > 0 else 1.0
    for o in ops:
        o["self_us"] *= scale
    ops.sort(key=lambda o: -o["self_us"])
    out = {"iters": iters, "call_ms": one * 1e3 * scale, "device": str(device), "ops": ops[:40],
           "clock": "thread CPU time" if scale < 1.0 else "wall", "wall_to_cpu": round(scale, 4),
           "nonce": req.nonce, "compile_cache": cache.stats["status"] if cache is not None else "off"}
    if cuda:  # kernels shorter than their launch, or a GPU idle most of the call: launch-bound
        out.update(launches=launches, device_us=device_us)
    with open("profile.json", "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

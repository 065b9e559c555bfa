"""Bottleneck profile of one candidate, run inside the sandbox like the measurement harness.

Builds ModelNew exactly as the harness does (same seed, sizes, dtype, threads, no grad), warms it
up (compiled candidates compile here), then records a few calls with ``torch.profiler`` and writes
``profile.json``: per operator and input shapes, the calls, self time, and FLOPs where the profiler
derives them. Nothing here judges the candidate; it only says where the time goes.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I drops the script's folder
import kernel_checks as checks  # noqa: E402  (shipped next to this file)


def _load(name: str, path: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


_WARM: dict = {}


def warm() -> None:
    """What every profile needs before it reads its request, once per process: the allocator
    pinned, torch and its autograd profiler imported. A warm worker (sandbox/warm_worker.py) calls
    it once and forks a child per profile. No tensor op, no profiler session: no thread is left."""
    if _WARM:
        return
    _load("arbor_harness_allocator", os.path.join(os.path.dirname(os.path.abspath(__file__)), "allocator.py")).pin()
    import torch  # after pinning the allocator: profiles see the costs the harness times
    from torch.autograd import DeviceType, profiler  # noqa: F401

    gc.freeze()  # torch's objects out of the collector's sight (as the measurement harness does)
    _WARM["torch"] = torch


def main(argv: list[str]) -> int:
    warm()
    torch = _WARM["torch"]
    # torch.autograd's profiler, not torch.profiler's wrapper around it: that one's start imports
    # torch._inductor and torch._dynamo (3-5 s on a loaded 2-core machine, per profile job)
    from torch.autograd import DeviceType, profiler

    request_path = argv[1]
    req = json.loads(open(request_path).read())
    if req.get("num_threads"):
        torch.set_num_threads(int(req["num_threads"]))
    device = torch.device(req.get("device") or "cpu")
    dtype = getattr(torch, req["dtype"]) if req.get("dtype") else None
    problem = _load("arbor_problem", req["problem_file"])
    checks.apply_sizes(problem, req.get("sizes") or {}, req.get("size_scale"))
    torch.manual_seed(0)
    init = list(problem.get_init_inputs())
    cand = _load("arbor_candidate", req["candidate_file"])
    torch.manual_seed(0)
    model = cand.ModelNew(*init)
    model = model.to(device, dtype) if dtype else model.to(device)
    torch.manual_seed(0)
    xs = [x.to(device, dtype) if dtype is not None and isinstance(x, torch.Tensor) and x.is_floating_point()
          else (x.to(device) if isinstance(x, torch.Tensor) else x) for x in problem.get_inputs()]
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    with torch.no_grad():
        for _ in range(2):
            model(*xs)
        sync()
        t0 = time.perf_counter()
        model(*xs)
        sync()
        one = time.perf_counter() - t0
        iters = max(1, min(int(req.get("iters", 10)), int(float(req.get("budget_s", 1.0)) / max(one, 1e-6))))
        with profiler.profile(use_device="cuda" if cuda else None, use_kineto=True, record_shapes=True,
                              with_flops=True) as prof:
            for _ in range(iters):
                model(*xs)
            sync()
    ops = []
    launches = device_us = 0.0  # what ran on the GPU itself (kernels, copies), per call
    for e in prof.key_averages(group_by_input_shape=True):
        self_us = (e.self_device_time_total if cuda else e.self_cpu_time_total) or 0
        if self_us <= 0:
            continue
        on_device = cuda and getattr(e, "device_type", None) != DeviceType.CPU
        if on_device:
            launches += e.count / iters
            device_us += self_us / iters
        ops.append({"name": e.key, "calls": int(e.count) // iters or 1, "self_us": self_us / iters,
                    "shapes": [list(s) for s in (e.input_shapes or []) if isinstance(s, (list, tuple))][:4],
                    "flops": (e.flops or 0) / iters or None, **({"on_device": True} if on_device else {})})
    ops.sort(key=lambda o: -o["self_us"])
    out = {"iters": iters, "call_ms": one * 1e3, "device": str(device), "ops": ops[:40],
           "nonce": req.get("nonce")}
    if cuda:  # kernels shorter than their launch, or a GPU idle most of the call: launch-bound
        out.update(launches=launches, device_us=device_us)
    with open("profile.json", "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Bottleneck profiles: where a candidate's time goes, per operator, against the device's peaks.

The profile runs as its own sandbox job (``harness/profile_harness.py``) with the measurement's
sizes, dtype and threads, and comes back as data: per op the self time per call, its share of the
total, input shapes, FLOPs where the profiler derives them, bytes estimated from the input shapes,
and the achieved rate as a fraction of the device's peak compute and bandwidth. Failures are data
too (``{"error": ...}``): a profile is advice, never a gate.
"""

from __future__ import annotations

import json
import math
import secrets
import sys
from pathlib import Path

from .kernel_protocol import KernelRequest
from .runner import Job, PythonEntry, Runner

PROFILE_HARNESS = Path(__file__).parent / "harness" / "profile_harness.py"
_SHIPPED = ("kernel_checks.py", "allocator.py")
# a runner may start it warm (forked from a worker that imported torch and its profiler once)
PROFILE_ENTRY = PythonEntry("profile_harness.py", _SHIPPED)
_ELEMENT_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}
TOP = 12

CATEGORIES = (  # first match wins; names are aten op names without the namespace
    ("gemm", ("addmm", "mm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "addmv", "mv", "dot", "mkldnn_linear",
              "_mkl_linear", "einsum")),
    ("conv", ("conv", "convolution", "mkldnn_convolution", "_convolution", "slow_conv")),
    ("norm", ("layer_norm", "group_norm", "batch_norm", "native_layer_norm", "native_group_norm",
              "native_batch_norm", "instance_norm", "rms_norm", "_fused_rms_norm")),
    ("reduction", ("sum", "mean", "amax", "amin", "max", "min", "logsumexp", "softmax", "_softmax", "log_softmax",
                   "_log_softmax", "norm", "var", "std", "prod", "cumsum", "argmax", "argmin", "var_mean")),
    ("pool", ("max_pool", "avg_pool", "adaptive", "max_pool2d_with_indices")),
    ("layout", ("copy_", "clone", "contiguous", "transpose", "permute", "t", "view", "reshape", "expand",
                "cat", "stack", "to", "_to_copy", "empty", "zeros", "ones", "fill_", "as_strided", "select",
                "slice", "index", "unsqueeze", "squeeze")),
    ("compiled", ("compiled", "torch-compiled", "inductor", "cpp_fused", "triton", "graph_")),
)


def category(op_name: str) -> str:
    """gemm, conv, norm, reduction, pool, layout, compiled or elementwise (the rest)."""
    name = op_name.split("::")[-1].lower()
    for cat, names in CATEGORIES:
        if cat == "conv" and ("conv" in name):
            return cat
        if cat == "pool" and "pool" in name:
            return cat
        if cat == "compiled" and any(k in name for k in names):
            return cat
        if name in names or name.rstrip("_") in names:
            return cat
    return "elementwise"


def profile_job(req: KernelRequest, nonce: str, iters: int = 10, budget_s: float = 1.0) -> Job:
    body = {"problem_file": "problem.py", "candidate_file": "candidate.py", "sizes": req.sizes,
            "size_scale": req.size_scale, "dtype": req.dtype, "device": req.device,
            "num_threads": req.num_threads, "iters": iters, "budget_s": budget_s, "nonce": nonce}
    shipped = {n: PROFILE_HARNESS.with_name(n).read_text(encoding="utf-8") for n in _SHIPPED}
    return Job(argv=[sys.executable, "-I", "-B", "profile_harness.py", "request.json"],
               files={"profile_harness.py": PROFILE_HARNESS.read_text(encoding="utf-8"), **shipped,
                      "problem.py": req.problem_source, "candidate.py": req.candidate_source,
                      "request.json": json.dumps(body)},
               timeout_s=req.timeout_s, collect=["profile.json"],
               memory_bytes=None if req.device.startswith("cuda") else req.memory_bytes, entry=PROFILE_ENTRY)


def _bytes(shapes: list, dtype: str | None) -> float | None:
    size = _ELEMENT_BYTES.get(dtype or "float32", 4)
    total = sum(math.prod(s) for s in shapes if s and all(isinstance(d, int) for d in s))
    return float(total * size) if total else None


def summarize(raw: dict, dtype: str | None, peak: dict | None) -> dict:
    """Per-op shares, rates and position against ``peak`` ({flops_per_s, bytes_per_s})."""
    ops = raw.get("ops") or []
    total = sum(o["self_us"] for o in ops) or 1.0
    rows, shares = [], {}
    for o in ops:
        cat = category(o["name"])
        shares[cat] = shares.get(cat, 0.0) + o["self_us"] / total
        secs = o["self_us"] * 1e-6 / max(o.get("calls") or 1, 1)
        nbytes = _bytes(o.get("shapes") or [], dtype)
        flops = o.get("flops")
        row = {"op": o["name"], "category": cat, "share": o["self_us"] / total, "self_ms": o["self_us"] / 1e3,
               "calls": o.get("calls"), "shapes": o.get("shapes"), "flops": flops, "bytes_in": nbytes}
        calls = max(o.get("calls") or 1, 1)
        if peak and flops and peak.get("flops_per_s"):
            row["flops_frac_peak"] = (flops / calls / secs) / float(peak["flops_per_s"])
        if peak and nbytes and peak.get("bytes_per_s"):
            row["bytes_frac_peak"] = (nbytes / secs) / float(peak["bytes_per_s"])
        rows.append(row)
    top = rows[:TOP]
    dominant = top[0] if top else None
    bound = None
    if dominant is not None:
        f, b = dominant.get("flops_frac_peak"), dominant.get("bytes_frac_peak")
        bound = "compute" if f is not None and (b is None or f >= b) else ("memory" if b is not None else None)
    out = {"call_ms": raw.get("call_ms"), "iters": raw.get("iters"), "ops": top,
           "categories": dict(sorted(shares.items(), key=lambda kv: -kv[1])),
           "dominant": dominant["op"] if dominant else None, "dominant_bound": bound, "peak": peak}
    out.update(launch_profile(raw))
    return out


def launch_profile(raw: dict) -> dict:
    """GPU profiles: kernels launched per call, the GPU's busy time per call and its share of the
    call's wall time (what a CUDA graph can win back is the rest); {} for CPU profiles."""
    launches, device_us, call_ms = raw.get("launches"), raw.get("device_us"), raw.get("call_ms")
    if not launches or device_us is None or not call_ms:
        return {}
    return {"launches": round(float(launches), 2), "device_ms": float(device_us) / 1e3,
            "kernel_us": float(device_us) / float(launches),
            "gpu_busy": min(1.0, float(device_us) / 1e3 / float(call_ms))}


def run_profile(runner: Runner, req: KernelRequest, peak: dict | None = None) -> dict:
    """Profile ``req.candidate_source``; a summary dict, or {"error": one line}."""
    nonce = secrets.token_hex(16)
    try:
        res = runner.run(profile_job(req, nonce))
    except Exception as exc:  # noqa: BLE001 - a profile is advice: never fail the caller
        return {"error": f"profile job could not run: {exc}"}
    raw = res.outputs.get("profile.json")
    try:
        data = json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError):
        data = None
    if not isinstance(data, dict) or data.get("nonce") != nonce:
        text = (res.stderr_tail or "").strip().splitlines()[-1:]
        return {"error": "profile failed" + (f": {text[0][:200]}" if text else " (no profile.json)")}
    return summarize(data, req.dtype, peak)


def format_profile(p: dict, limit: int = 8) -> str:
    """A few plain lines (for ``arbor show`` and LLM prompts)."""
    if not p or p.get("error"):
        return f"profile: {p.get('error') if p else 'none'}"
    cats = ", ".join(f"{k} {v:.0%}" for k, v in list(p.get("categories", {}).items())[:5])
    lines = [f"profile: {p.get('call_ms') or 0:.2f} ms per call; time by kind: {cats}"]
    if p.get("launches"):
        lines.append(f"  GPU: {p['launches']:g} kernels per call, {p['kernel_us']:.1f} us each on average, "
                     f"busy {p['gpu_busy']:.0%} of the call")
    for o in p.get("ops", [])[:limit]:
        pos = []
        if o.get("flops_frac_peak") is not None:
            pos.append(f"{o['flops_frac_peak']:.0%} of peak FLOP/s")
        if o.get("bytes_frac_peak") is not None:
            pos.append(f"{o['bytes_frac_peak']:.0%} of peak bandwidth")
        shapes = " ".join("x".join(map(str, s)) for s in (o.get("shapes") or [])[:3])
        lines.append(f"  {o['share']:5.1%} {o['op']} [{o['category']}] {o['self_ms']:.3f} ms"
                     f"{' ' + shapes if shapes else ''}{' (' + ', '.join(pos) + ')' if pos else ''}")
    return "\n".join(lines)

"""Bottleneck profiles: where a candidate's time goes, per operator, against the device's peaks.

The profile runs as its own sandbox job (``harness/profile_harness.py``) with the measurement's
sizes, dtype and threads, and comes back as data: per op the self time per call, its share of the
total, input shapes, and the bytes and FLOPs of its own work (a parent op is never credited with
its children's: ``harness/cost.py``), and the achieved rates as fractions of the peaks the campaign
runs at (the campaign's thread count on CPU, read at the op's working set: an op on cache-sized
tensors is held to the cache's bandwidth, a larger one to DRAM's).

Every fraction is capped by physics: up to ``ABOVE_PEAK_TOLERANCE`` above 1 is the peak's own
measurement noise and reads 100%. An op whose share of the measured call reads beyond that, but
whose own profiled time does not, is read on its profiled time with a note (``notes``: the anchoring
scaled it below its real time). Beyond that on both the bytes, the time or the peak is wrong, and
the reading is listed under ``anomalies`` as a bug instead of being shown as a number. An opaque
call (a compiled graph or region) is the exception: its bytes are its arguments, which it need not
read, so its rate is an upper bound ("at most"), and above the peak it is left unrated with a note
(``_rate_opaque``). Failures are data
too (``{"error": ...}``): a profile is advice, never a gate.
"""

from __future__ import annotations

import json
import secrets
import sys
from pathlib import Path

from ..gpu.devices import bandwidth_at, flops_at, within_peak
from ..harness.op_math import transcendental_seconds
from ..harness.request import ProfileRequest
from .compile_store import ARCHIVE_IN, ARCHIVE_OUT, default_cache, lookup
from .protocol import KernelRequest
from ..runner import Job, PythonEntry, Runner

PROFILE_HARNESS = Path(__file__).parents[1] / "harness" / "profile_harness.py"
# cost.py loads op_math.py, compile_cache.py extension_cache.py
_SHIPPED = ("problem_sizes.py", "allocator.py", "cost.py", "op_math.py", "compile_cache.py", "extension_cache.py",
            "request.py")
# a runner may start it warm (forked from a worker that imported torch and its profiler once)
PROFILE_ENTRY = PythonEntry("profile_harness.py", _SHIPPED)
TOP = 12
# Ops whose self time per call is shorter than this are not rated: the profiler's clock and its
# own overhead are of that order, and a rate over a fraction of a microsecond means nothing.
MIN_RATED_US = 2.0

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


def profile_job(req: KernelRequest, nonce: str, iters: int = 10, budget_s: float = 1.0,
                cache_key: str | None = None, archive: bytes | None = None) -> Job:
    """The profile job. A compiled candidate's archive from its measurements (``cache_key``,
    ``archive``: sandbox/kernel/compile_store.py) travels in, so the profile loads what they compiled
    instead of compiling again (15 s a profile on the quickstart, once per new best); the job
    sends nothing back to the cache: only measurements fill it."""
    cache = {"key": cache_key, "in": ARCHIVE_IN, "out": ARCHIVE_OUT} if cache_key and archive else None  # out: never collected
    body = ProfileRequest(problem_file="problem.py", candidate_file="candidate.py", nonce=nonce, sizes=req.sizes,
                          size_scale=req.size_scale, dtype=req.dtype, device=req.device, num_threads=req.num_threads,
                          iters=iters, budget_s=budget_s, compile_cache=cache)
    shipped = {n: PROFILE_HARNESS.with_name(n).read_text(encoding="utf-8") for n in _SHIPPED}
    return Job(argv=[sys.executable, "-I", "-B", "profile_harness.py", "request.json"],
               files={"profile_harness.py": PROFILE_HARNESS.read_text(encoding="utf-8"), **shipped,
                      "problem.py": req.problem_source, "candidate.py": req.candidate_source,
                      "request.json": body.to_json(), **({ARCHIVE_IN: archive} if cache_key and archive else {})},
               timeout_s=req.timeout_s, collect=["profile.json"],
               memory_bytes=None if req.device.startswith("cuda") else req.memory_bytes, entry=PROFILE_ENTRY)


def _rate(op: dict, what: str, achieved: float, peak: float,
          observed: float | None = None) -> tuple[float | None, str | None, str | None]:
    """(fraction of ``peak`` to show, or None; a bug report when the reading is impossible; a note
    when only the anchoring made it so). ``achieved``: the rate on the op's share of the measured
    call; ``observed``: on its own profiled time. Anchoring scales every op by one factor, but the
    profiler's overhead does not fall evenly (page faults of fresh outputs, its bookkeeping per
    call): a cheap op the profiler did not slow is scaled below its real time, and a CI VM's 1-thread
    ``pow`` read 125% of the peak that way. Only a rate impossible on its own profiled time as well
    is a bug; otherwise the op is read on its profiled time (a lower bound on its rate)."""
    if peak <= 0:
        return None, None, None
    frac = achieved / peak
    shown = within_peak(frac)
    if shown is not None:
        return shown, None, None
    if observed is not None and observed < achieved and within_peak(observed / peak) is not None:
        return within_peak(observed / peak), None, (
            f"{op['op']} read {frac:.0%} of peak {what} on its share of the measured call and "
            f"{observed / peak:.0%} on its own profiled time: the profiler's overhead fell on other ops; "
            f"read on its profiled time")
    return None, (f"{op['op']} read {frac:.0%} of peak {what} ({achieved / 1e9:.3g} G/s against "
                  f"{peak / 1e9:.3g} G/s): the bytes, the time or the peak is wrong — a bug, please report it"), None


def _rate_opaque(op: dict, achieved: float, peak: float) -> tuple[float | None, str | None]:
    """An opaque call's rate (a compiled graph, a compiled region): its bytes are its arguments,
    which it need not read — a graph that hands its input to a C++ extension called after it
    touches none of it in microseconds. So its bytes are an upper bound and so is its rate: shown
    as "at most", and above the peak not a contradiction (no bug) but a call that did not read its
    arguments. Seen: a compiled candidate around a generated extension, its CompiledFxGraph event
    at "1124% of peak bandwidth". (An aten op's bytes are what it must move: above the peak there
    is a bug, ``_rate``.)"""
    if peak <= 0:
        return None, None
    frac = achieved / peak
    shown = within_peak(frac)
    if shown is not None:
        return shown, None
    return None, (f"{op['op']}: its arguments ({(op.get('bytes') or 0) / 1e6:.3g} MB) are more than it can have "
                  f"moved in its time ({frac:.0%} of peak bandwidth): a compiled call need not read its inputs "
                  f"(its work ran elsewhere, e.g. in an extension after it); not rated")


def summarize(raw: dict, dtype: str | None, peak: dict | None, call_s: float | None = None) -> dict:
    """Per-op shares, rates and position against ``peak`` (the rates the campaign runs at: a
    measured CPU peak with its bandwidth curve, or a GPU's {flops_per_s, bytes_per_s}).

    ``call_s``: the time per call the measurement harness measured for this code. The profile's
    self times are then its *shares* of that time: the profiler's own clock carries what the
    measurement does not (its overhead, page faults its bookkeeping causes, preemption on a busy
    machine: a 132 MB ReLU profiled at 33 ms per call was measured at 7.4 ms), and an op's rate is
    read on the time the campaign reports."""
    ops = [dict(o) for o in raw.get("ops") or []]
    total = sum(o["self_us"] for o in ops) or 1.0
    anchored = None
    if call_s and call_s > 0 and ops:
        scale = call_s * 1e6 / total
        for o in ops:
            o["profiled_us"] = o["self_us"]
            o["self_us"] *= scale
        anchored = {"profiled_ms": total / 1e3, "measured_ms": call_s * 1e3}
        total = call_s * 1e6
    rows, shares, anomalies, notes = [], {}, [], []
    for o in ops:
        cat = category(o["name"])
        shares[cat] = shares.get(cat, 0.0) + o["self_us"] / total
        calls = max(o.get("calls") or 1, 1)
        secs = o["self_us"] * 1e-6  # per model call, all of this op's calls together
        own = o.get("profiled_us", o["self_us"]) * 1e-6  # the op's own time under the profiler
        nbytes, flops = o.get("bytes"), o.get("flops")
        row = {"op": o["name"], "category": cat, "share": o["self_us"] / total, "self_ms": o["self_us"] / 1e3,
               "calls": o.get("calls"), "shapes": o.get("shapes"), "flops": flops, "bytes": nbytes,
               "footprint": o.get("footprint")}
        if o.get("transcendentals"):
            row["transcendentals"] = o["transcendentals"]
        if peak and o["self_us"] / calls >= MIN_RATED_US:
            math_s = (flops or 0) / max(flops_at(peak, dtype), 1.0) + transcendental_seconds(
                o.get("transcendentals"), peak.get("vector"), flops_at(peak, dtype))
            if o.get("transcendentals") and math_s > 0:  # the share of its time its arithmetic needs at least
                row["compute_frac"], bug, note = _rate(row, "arithmetic", 1 / secs, 1 / math_s, 1 / own)
                anomalies += [bug] if bug else []
                notes += [note] if note else []
            if flops:
                row["flops_frac_peak"], bug, note = _rate(row, "FLOP/s", flops / secs, flops_at(peak, dtype),
                                                          flops / own)
                anomalies += [bug] if bug else []
                notes += [note] if note else []
            if nbytes and cat == "compiled":
                bw = bandwidth_at(peak, o.get("footprint") or nbytes / calls)
                row["peak_bytes_per_s"] = bw
                at_most, note = _rate_opaque(row, nbytes / secs, bw)
                if at_most is not None:
                    row["bytes_frac_peak_at_most"] = at_most
                notes += [note] if note else []
            elif nbytes:
                bw = bandwidth_at(peak, o.get("footprint") or nbytes / calls)
                row["bytes_frac_peak"], bug, note = _rate(row, "bandwidth", nbytes / secs, bw, nbytes / own)
                row["peak_bytes_per_s"] = bw
                anomalies += [bug] if bug else []
                notes += [note] if note else []
        rows.append(row)
    top = rows[:TOP]
    dominant = top[0] if top else None
    bound = None
    if dominant is not None:
        f, b = dominant.get("flops_frac_peak"), dominant.get("bytes_frac_peak")
        bound = "compute" if f is not None and (b is None or f >= b) else ("memory" if b is not None else None)
    out = {"call_ms": call_s * 1e3 if anchored else raw.get("call_ms"), "iters": raw.get("iters"),
           "clock": "measured" if anchored else raw.get("clock"), "anchored": anchored, "ops": top,
           "categories": dict(sorted(shares.items(), key=lambda kv: -kv[1])),
           "dominant": dominant["op"] if dominant else None, "dominant_bound": bound,
           "peak": describe_peak(peak, dtype), "anomalies": anomalies, "notes": notes,
           "compile_cache": raw.get("compile_cache")}
    out.update(launch_profile({**raw, "call_ms": out["call_ms"]}))  # the GPU's busy share of the measured call
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


def describe_peak(peak: dict | None, dtype: str | None) -> dict | None:
    """What a profile was read against, for readers: the stream (largest working set) rate, the
    GEMM rate for the problem's dtype, the bandwidth curve, threads and where it came from."""
    if not peak:
        return None
    out = {"bytes_per_s": bandwidth_at(peak, float("inf")), "flops_per_s": flops_at(peak, dtype),
           "source": peak.get("source"), "threads": peak.get("threads")}
    if peak.get("bandwidth"):
        out["bandwidth"] = peak["bandwidth"]
    return out


def run_profile(runner: Runner, req: KernelRequest, peak: dict | None = None, call_s: float | None = None) -> dict:
    """Profile ``req.candidate_source``; a summary dict, or {"error": one line}. ``call_s``: its
    measured time per call, which the profile's self times are shares of (``summarize``)."""
    nonce = secrets.token_hex(16)
    try:
        key, archive = lookup(default_cache(), req, runner)
        res = runner.run(profile_job(req, nonce, cache_key=key, archive=archive))
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
    return summarize(data, req.dtype, peak, call_s)


def format_profile(p: dict, limit: int = 8) -> str:
    """A few plain lines (for ``arbor show`` and LLM prompts)."""
    if not p or p.get("error"):
        return f"profile: {p.get('error') if p else 'none'}"
    cats = ", ".join(f"{k} {v:.0%}" for k, v in list(p.get("categories", {}).items())[:5])
    clock = {"thread CPU time": " (on the thread's CPU time)",
             "measured": " (as measured; op times are the profile's shares of it)"}.get(p.get("clock") or "", "")
    lines = [f"profile: {p.get('call_ms') or 0:.2f} ms per call{clock}; time by kind: {cats}"]
    peak = p.get("peak") or {}
    if peak.get("bytes_per_s"):
        threads = f", {peak['threads']} thread{'s' if peak['threads'] != 1 else ''}" if peak.get("threads") else ""
        lines.append(f"  read against {peak['bytes_per_s'] / 1e9:.3g} GB/s stream (cache levels for smaller working "
                     f"sets), {(peak.get('flops_per_s') or 0) / 1e9:.3g} GFLOP/s ({peak.get('source') or '?'}{threads})")
    if p.get("launches"):
        lines.append(f"  GPU: {p['launches']:g} kernels per call, {p['kernel_us']:.1f} us each on average, "
                     f"busy {p['gpu_busy']:.0%} of the call")
    for o in p.get("ops", [])[:limit]:
        pos = []
        if o.get("compute_frac") is not None:  # transcendentals at the measured vector rates
            fns = "+".join(sorted(o.get("transcendentals") or {}))
            pos.append(f"{o['compute_frac']:.0%} of its arithmetic's bound ({fns})")
        elif o.get("flops_frac_peak") is not None:
            pos.append(f"{o['flops_frac_peak']:.0%} of peak FLOP/s")
        if o.get("bytes_frac_peak") is not None:
            pos.append(f"{o['bytes_frac_peak']:.0%} of peak bandwidth")
        elif o.get("bytes_frac_peak_at_most") is not None:  # an opaque call: its arguments, read or not
            pos.append(f"at most {o['bytes_frac_peak_at_most']:.0%} of peak bandwidth")
        shapes = " ".join("x".join(map(str, s)) for s in (o.get("shapes") or [])[:3])
        lines.append(f"  {o['share']:5.1%} {o['op']} [{o['category']}] {o['self_ms']:.3f} ms"
                     f"{' ' + shapes if shapes else ''}{' (' + ', '.join(pos) + ')' if pos else ''}")
    lines += [f"  note: {a}" for a in p.get("notes") or []]
    lines += [f"  BUG: {a}" for a in p.get("anomalies") or []]
    return "\n".join(lines)

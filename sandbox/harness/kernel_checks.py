"""Pure checks used by kernel_harness.py: size overrides, output comparison, fingerprint.

Standalone like the harness (stdlib + torch only, never ``import arbor``): it is shipped into the
sandbox beside the harness and loaded by path. Kept apart so these rules can be unit-tested in
process, without paying for a sandbox start.
"""

from __future__ import annotations

import math
import os
import platform
import socket

import torch


class SizeError(ValueError):
    """A ``sizes`` override names no module-level int of the problem."""


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def apply_sizes(module, sizes: dict, scale: float | None) -> dict:  # type: ignore[no-untyped-def]
    """Rewrite module-level ints that get_inputs()/get_init_inputs() read at call time.

    Unchanged upstream KernelBench files keep their sizes in globals such as ``batch_size``; scaling
    every int >= 16 shrinks a problem for quick development runs without editing the file.
    """
    ints = {k: v for k, v in vars(module).items() if not k.startswith("__") and type(v) is int}
    unknown = sorted(set(sizes) - set(ints))
    if unknown:
        raise SizeError(f"sizes override {unknown} names no module-level int in the "
                      f"problem (its ints: {sorted(ints)}); fix target.sizes in the campaign")
    applied = {}
    if scale is not None:
        applied = {k: max(1, int(round(v * scale))) for k, v in ints.items()
                   if v >= 16 and k not in sizes}
    applied.update({k: int(v) for k, v in sizes.items()})
    for k, v in applied.items():
        setattr(module, k, v)
    return applied


def compare(ref, new, atol: float, rtol: float) -> dict:  # type: ignore[no-untyped-def]
    """Compare outputs element-wise in float64: ok, max_abs_err, max_rel_err and a reason."""
    refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    news = list(new) if isinstance(new, (tuple, list)) else [new]
    res = {"ok": False, "max_abs_err": None, "max_rel_err": None, "reason": None}
    if len(refs) != len(news):
        res["reason"] = f"returned {len(news)} outputs, expected {len(refs)}"
        return res
    max_abs = max_rel = 0.0
    for i, (r, c) in enumerate(zip(refs, news)):
        if not isinstance(r, torch.Tensor):
            if type(c) is not type(r) or r != c:
                res["reason"] = f"output {i}: {c!r} != {r!r}"
                return res
            continue
        if type(c) not in (torch.Tensor, torch.nn.Parameter):  # subclasses can fake values
            res["reason"] = f"output {i}: returned {type(c).__name__}, expected a plain torch.Tensor"
            return res
        if c.shape != r.shape or c.dtype != r.dtype or c.device != r.device:
            res["reason"] = (f"output {i}: shape/dtype/device {tuple(c.shape)}/{c.dtype}/{c.device}"
                             f", expected {tuple(r.shape)}/{r.dtype}/{r.device}")
            return res
        r64, c64 = r.detach().double(), c.detach().double()
        if r64.numel() == 0:
            continue
        diff = (c64 - r64).abs().masked_fill((r64.isnan() & c64.isnan()) | r64.eq(c64), 0.0)
        rel = diff / r64.abs().clamp_min(1e-12)
        max_abs = max(max_abs, float(diff.nan_to_num(nan=math.inf).max()))
        max_rel = max(max_rel, float(rel.nan_to_num(nan=math.inf).max()))
        bad_nan = c64.isnan() & r64.isfinite()
        if bool(bad_nan.any()):
            res["reason"] = f"output {i}: {int(bad_nan.sum())} NaN where the reference is finite"
        elif not torch.allclose(c64, r64, atol=atol, rtol=rtol, equal_nan=True):
            res["reason"] = f"output {i}: values differ beyond atol={atol}, rtol={rtol}"
        if res["reason"]:
            break
    ok = res["reason"] is None
    res.update(ok=ok, max_abs_err=_finite(max_abs), max_rel_err=_finite(max_rel))
    return res


def fingerprint(device: str) -> dict:
    """Where the numbers came from: timings are never comparable across machines."""
    cpuinfo = _read("/proc/cpuinfo") or ""
    models = [ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines()
              if ln.lower().startswith("model name")]
    fp = {
        "host": socket.gethostname(), "platform": platform.platform(),
        "python": platform.python_version(), "torch": torch.__version__,
        "cpu_model": models[0] if models else platform.processor() or None,
        "cpu_count": os.cpu_count(), "cpu_affinity": len(os.sched_getaffinity(0)),
        "governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "num_threads": torch.get_num_threads(), "device": device,
    }
    fp["device_name"] = fp["cpu_model"] or platform.machine()
    if device.startswith("cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.device(device).index or 0)
        driver = _read("/proc/driver/nvidia/version")
        fp.update(device_name=props.name, gpu_name=props.name, cuda_runtime=torch.version.cuda,
                  gpu_capability=f"{props.major}.{props.minor}", gpu_sms=props.multi_processor_count,
                  gpu_memory_bytes=props.total_memory,
                  gpu_driver=driver.splitlines()[0] if driver else None)
    return fp

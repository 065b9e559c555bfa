"""Choosing each problem's ``size_scale`` so the eager reference takes about a target time.

Upstream sizes are meant for large GPUs; on one CPU thread a problem can take minutes. One child
process (one thread, no grad; torch imported once) times the eager reference at two small scales,
fits the growth exponent (a GEMM grows ~s^3, an elementwise op ~s^2), extrapolates the scale that
hits the target and checks it. A scale at which the reference itself fails (sizes too small to be
valid: a 1x1 conv output under GroupNorm) is grown past, not reported as the problem's failure. Sizes are applied by the harness's own function, so derived
globals behave exactly as they will in the campaign.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
import time
from pathlib import Path

MIN_SCALE, MAX_SCALE = 1e-3, 4.0
MAX_STEP = 3.0  # never probe more than 3x the largest scale timed so far (memory grows ~s^3)
MAX_PROBES = 4


class CalibrationError(RuntimeError):
    pass


def _time_eager(path: str, scale: float) -> float:
    """Median eager forward time in ms (runs inside the child)."""
    import torch

    from arbor.sandbox.harness.problem_sizes import apply_sizes

    spec = importlib.util.spec_from_file_location(f"arbor_suite_probe_{time.monotonic_ns()}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    apply_sizes(mod, {}, scale)
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs())
    xs = mod.get_inputs()
    times: list[float] = []
    with torch.no_grad():
        model(*xs)
        deadline = time.perf_counter() + 2.0
        while len(times) < 5 or (len(times) < 20 and time.perf_counter() < deadline):
            t0 = time.perf_counter()
            model(*xs)
            times.append(time.perf_counter() - t0)
            if times[-1] > 1.0 and len(times) >= 2:
                break
    times.sort()
    return times[len(times) // 2] * 1e3


def search(path: str, target_ms: float, start: float = 0.125) -> dict:
    """The scale whose eager time is closest to ``target_ms`` (runs inside the child)."""
    import torch

    from arbor.sandbox.harness.allocator import pin

    pin()  # the host allocator the harness times with: unpinned, large tensors page-fault per call
    torch.set_num_threads(1)
    probes: list[tuple[float, float]] = []

    def probe(s: float) -> float:
        s = min(MAX_SCALE, max(MIN_SCALE, s))
        ms = _time_eager(path, s)
        probes.append((s, ms))
        return ms

    s1 = start
    while True:  # a size can be too small to be valid (a conv output of 1x1 under GroupNorm): grow
        try:
            t1 = probe(s1)
            break
        except Exception:
            if s1 >= 1.0:
                raise
            s1 = min(1.0, s1 * 2)
    floor = s1  # the smallest scale known to run
    while t1 > 4 * target_ms and s1 > MIN_SCALE * 2:  # too slow even small: shrink first
        try:
            t1 = probe(s1 / 2)
        except Exception:
            break
        s1 /= 2
    try:
        probe(s1 * 2)
    except Exception:
        pass
    for _ in range(MAX_PROBES if len(probes) >= 2 else 0):
        # log-log interpolation between the two probes nearest the target (tiny sizes are
        # overhead-bound, so the exponent is refitted as the probes close in)
        near = sorted(probes, key=lambda p: abs(math.log(max(p[1], 1e-3) / target_ms)))[:2]
        (sa, ta), (sb, tb) = near
        if abs(math.log(max(ta, 1e-3) / target_ms)) < math.log(1.25) or sa == sb:
            break
        k = math.log(max(tb, 1e-3) / max(ta, 1e-3)) / math.log(sb / sa)
        k = min(4.0, max(0.5, k))
        nxt = min(MAX_SCALE, max(MIN_SCALE, sa * (target_ms / max(ta, 1e-3)) ** (1 / k)))
        nxt = min(nxt, MAX_STEP * max(p[0] for p in probes))
        if any(abs(math.log(nxt / p[0])) < 1e-3 for p in probes) or nxt < floor:
            break
        try:
            probe(nxt)
        except Exception:  # that size is not valid: keep the best of the ones that ran
            break
    best = min(probes, key=lambda p: abs(math.log(max(p[1], 1e-3) / target_ms)))
    return {"scale": round(best[0], 5), "eager_ms": best[1], "probes": probes}


def calibrate(path: Path, target_ms: float, timeout_s: float = 600.0) -> dict:
    """{"scale", "eager_ms", "probes"} for ``path``; CalibrationError (one line) on failure."""
    code = "import json, sys; from arbor.suite.calibrate import search; " \
           "print(json.dumps(search(sys.argv[1], float(sys.argv[2]))))"
    try:
        res = subprocess.run([sys.executable, "-c", code, str(path), repr(float(target_ms))],
                             capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise CalibrationError(f"{path.name}: sizing the eager reference took over {timeout_s:.0f} s") from None
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise CalibrationError(f"{path.name}: the eager reference failed while sizing it: {last}")
    return json.loads(res.stdout.strip().splitlines()[-1])

"""Pure checks used by kernel_harness.py: output comparison, degenerate problems, failures.

Standalone like the harness (stdlib + torch only, never ``import arbor``): it is shipped into the
sandbox beside the harness and loaded by path. Kept apart so these rules can be unit-tested in
process, without paying for a sandbox start. A problem's size overrides are ``problem_sizes.py``.

A comparison result carries a ``code``: ``incorrect`` for wrong values, ``hack_suspected`` for
outputs that cannot be honest whatever their values (tensor subclasses, expanded/overlapping
"outputs" that fake a large result from a small one). The Critic routes the two differently.
"""

from __future__ import annotations

import math
import sys

import torch

# KernelBench's per-precision tolerances (atol = rtol). Integers and bools must match exactly. In a
# precision mode (the request's dtype) every floating-point output is compared at the mode's tolerance.
DTYPE_TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2,
                   torch.float64: 1e-7, torch.complex64: 1e-4, torch.complex128: 1e-7}
_FP8 = [getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)]
DTYPE_TOLERANCE.update({d: 1e-1 for d in _FP8})


class Failure(Exception):
    """A classified failure: compile_error, runtime_error, oom, incorrect, hack_suspected or
    harness_error. Raised anywhere in the harness; main() turns it into result.json."""

    def __init__(self, error_class: str, text: str) -> None:
        super().__init__(text)
        self.error_class, self.text = error_class, text

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), (self.error_class, self.text))


def bad_reference_output(out) -> str | None:  # type: ignore[no-untyped-def]
    """Why a reference output cannot be compared against, or None: candidates would otherwise be
    judged against ``None`` (or a non-tensor) and pass or fail for no reason."""
    items = flat(out)
    if out is None or not items:
        return "returned None" if out is None else "returned an empty sequence"
    for i, x in enumerate(items):
        if x is None:
            return f"returned None as output {i}"
    if not tensors(out):
        return f"returned {type(out).__name__}, not a tensor"
    return None


def tolerance(dtype: torch.dtype, atol: float | None, rtol: float | None,
              mode: float | None = None) -> tuple[float, float]:
    """Explicit campaign tolerances win; then, for floating-point outputs, the precision mode's
    (``mode``, KernelBench: fp32 1e-4, fp16/bf16 1e-2); otherwise the output's own dtype decides."""
    default = DTYPE_TOLERANCE.get(dtype, 0.0)
    if mode is not None and (dtype.is_floating_point or dtype.is_complex):
        default = mode
    return (default if atol is None else atol, default if rtol is None else rtol)


def flat(out) -> list:  # type: ignore[no-untyped-def]
    return list(out) if isinstance(out, (tuple, list)) else [out]


def nbytes(t) -> int:  # type: ignore[no-untyped-def]
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


def tensors(out) -> list:  # type: ignore[no-untyped-def]
    return [t for t in flat(out) if isinstance(t, torch.Tensor)]


def dense(t: torch.Tensor) -> bool:
    """Every element has its own memory and there are no gaps: any permutation of a contiguous
    layout (NCHW, NHWC, a transpose) qualifies; expanded (stride-0) or overlapping views do not."""
    dims = sorted((st, sz) for st, sz in zip(t.stride(), t.shape) if sz != 1)
    expect = 1
    for st, sz in dims:
        if st != expect:
            return False
        expect *= sz
    return True


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise-style equality where NaN equals NaN (used for 'unchanged', not for 'correct')."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return bool(torch.equal(a, b))


def storage_span(t: torch.Tensor) -> tuple[int, int] | None:
    try:
        st = t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None
    start = st.data_ptr()
    return (start, start + st.nbytes()) if st.nbytes() else None


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device != b.device:
        return False
    sa, sb = storage_span(a), storage_span(b)
    return sa is not None and sb is not None and sa[0] < sb[1] and sb[0] < sa[1]


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _fail(res: dict, code: str, reason: str) -> dict:
    res.update(ok=False, code=code, reason=reason)
    return res


def _compare_tensor(i: int, r: torch.Tensor, c, atol, rtol, fraction: float,  # type: ignore[no-untyped-def]
                    outlier: float, res: dict, mode: float | None = None) -> dict | None:
    if type(c) not in (torch.Tensor, torch.nn.Parameter):  # subclasses can fake values
        return _fail(res, "hack_suspected", f"output {i}: returned {type(c).__name__}, expected a "
                     "plain torch.Tensor (tensor subclasses can fake comparisons)")
    if c.layout != r.layout or c.shape != r.shape or c.dtype != r.dtype or c.device != r.device:
        return _fail(res, "incorrect", f"output {i}: shape/dtype/device {tuple(c.shape)}/{c.dtype}/"
                     f"{c.device}, expected {tuple(r.shape)}/{r.dtype}/{r.device}")
    if c.layout == torch.strided and c.numel() > 1 and not dense(c) and dense(r):
        return _fail(res, "hack_suspected", f"output {i}: an expanded or overlapping view (strides "
                     f"{tuple(c.stride())}) where the reference returns a materialized tensor")
    if r.numel() == 0:
        return None
    if torch.equal(r, c):  # bit for bit (NaN never equals): every error is 0, every check passes
        res["max_abs_err"] = max(res["max_abs_err"] or 0.0, 0.0)
        res["max_rel_err"] = max(res["max_rel_err"] or 0.0, 0.0)
        res["close_fraction"] = min(res.get("close_fraction") or 1.0, 1.0)
        return None
    a, b = tolerance(r.dtype, atol, rtol, mode)
    t = _tally(r.detach().reshape(-1), c.detach().reshape(-1), a, b, outlier)
    res["max_abs_err"] = max(res["max_abs_err"] or 0.0, _nan_inf(t["max_abs"]))
    res["max_rel_err"] = max(res["max_rel_err"] or 0.0, _nan_inf(t["max_rel"]))
    if t["bad"]:
        return _fail(res, "incorrect", f"output {i}: {t['bad']} NaN/Inf values where the "
                     "reference is finite")
    if c.numel() > 1 and t["finite_r"]:
        if not t["c_nonzero"] and t["r_nonzero"]:
            return _fail(res, "incorrect", f"output {i}: all zeros, the reference is not")
        if t["c_constant"] and not t["r_constant"]:
            return _fail(res, "incorrect", f"output {i}: constant, the reference is not")
    share = t["within"] / r.numel()
    res["close_fraction"] = min(res.get("close_fraction") or 1.0, share)
    if share < fraction:
        return _fail(res, "incorrect", f"output {i}: {share:.2%} of elements within atol={a:g}, "
                     f"rtol={b:g} (needs {fraction:.2%})")
    if t["far"]:
        return _fail(res, "incorrect", f"output {i}: {t['far']} element(s) off by more than "
                     f"{outlier:g}x the tolerance (max abs err {res['max_abs_err']:.3g})")
    return None


# Elements per pass of ``_tally`` on a CPU: its float64 temporaries (a dozen of 512 KiB) stay in
# the core's caches. One pass over a whole 4M-element output streamed ~20 arrays of 32 MiB through
# memory: 270 ms a comparison on one core (84 ms chunked; 2^13-2^17 measured, 2^16 best), ~1 s of
# a compiled Softmax candidate's 5 s measurement (its output is not bit-identical to the reference's,
# so each of its ~8 checks takes this path).
_CHUNK = 1 << 16


def _step(t: torch.Tensor) -> int:
    """Elements per pass: cache-sized on a CPU, the whole tensor on a device (a chunk = a launch)."""
    return _CHUNK if t.device.type == "cpu" else max(t.numel(), 1)


def _tally(r: torch.Tensor, c: torch.Tensor, a: float, b: float, outlier: float) -> dict:
    """Element-wise comparison of two flat tensors in float64 (complex128), in cache-sized chunks
    on a CPU (one pass on a device, where each chunk would cost a launch): the largest absolute and
    relative errors (NaN where an error is NaN), elements within ``a + b*|r|`` (or matching exactly,
    NaN for NaN), elements more than ``outlier`` times outside it, non-finite values where the
    reference is finite, and whether either side is all zero or constant. A chunk whose values are
    all finite skips the NaN bookkeeping (``x - x`` is 0 for every finite x, so exact matches need
    no mask), and the zero/constant questions stop being asked once answered."""
    wide = torch.complex128 if r.is_complex() else torch.float64
    n = r.numel()
    step = _step(r)
    r0, c0 = r[:1].to(wide), c[:1].to(wide)
    t = {"max_abs": 0.0, "max_rel": 0.0, "bad": 0, "within": 0, "far": 0, "finite_r": True,
         "c_nonzero": False, "r_nonzero": False, "c_varies": False, "r_varies": False}
    for s in range(0, n, step):
        r64, c64 = r[s:s + step].to(wide), c[s:s + step].to(wide)
        finite_r, finite_c = r64.isfinite(), c64.isfinite()
        all_r, all_c = bool(finite_r.all()), bool(finite_c.all())
        t["finite_r"] = t["finite_r"] and all_r
        diff = c64 - r64
        diff = diff.abs() if diff.is_complex() else diff.abs_()
        same = None
        if not (all_r and all_c):
            same = (r64.isnan() & c64.isnan()) | r64.eq(c64)  # matching NaN and equal infinities are exact
            diff.masked_fill_(same, 0.0)
            t["bad"] += int((finite_r & ~finite_c).sum())
        r_abs = r64.abs()
        bound = r_abs.mul(b).add_(a)  # a + b * |r|
        t["max_abs"] = _max_nan(t["max_abs"], float(diff.max()))  # NaN propagates
        t["max_rel"] = _max_nan(t["max_rel"], float(diff.div(r_abs.clamp_min_(1e-12)).max()))
        within, far = diff.le(bound), diff.gt(bound.mul_(outlier))
        if same is not None:
            within, far = within | same, far & ~same
        t["within"] += int(within.sum())
        t["far"] += int(far.sum())
        for key, side, value in (("c_nonzero", c64, 0), ("r_nonzero", r64, 0), ("c_varies", c64, c0),
                                 ("r_varies", r64, r0)):
            if not t[key]:
                t[key] = bool(side.ne(value).any())
    t["c_constant"], t["r_constant"] = not t.pop("c_varies"), not t.pop("r_varies")
    return t


def _max_nan(a: float, b: float) -> float:
    return a if math.isnan(a) else (b if math.isnan(b) or b > a else a)


def _nan_inf(x: float) -> float:
    """The max of ``diff.nan_to_num(nan=inf)`` from ``diff.max()``: a NaN (torch's max propagates
    it) reads as infinitely wrong, an infinite error as the largest float (kept in the report)."""
    return math.inf if math.isnan(x) else (sys.float_info.max if x == math.inf else x)


def compare(ref, new, atol: float | None = None, rtol: float | None = None,  # type: ignore[no-untyped-def]
            close_fraction: float = 1.0, outlier_factor: float = 10.0, mode: float | None = None) -> dict:
    """Compare outputs element-wise in float64. ``atol``/``rtol`` None: the precision ``mode``'s
    tolerance for floating-point outputs, else per-dtype defaults.

    At least ``close_fraction`` of each output's elements must be within tolerance and none may be
    more than ``outlier_factor`` times outside it (rounding differs; garbage does not); NaN/Inf where
    the reference is finite, and all-zero or constant outputs where the reference is neither, fail.
    """
    refs, news = flat(ref), flat(new)
    res = {"ok": True, "code": None, "max_abs_err": None, "max_rel_err": None, "reason": None,
           "close_fraction": None}
    if len(refs) != len(news):
        return _fail(res, "incorrect", f"returned {len(news)} outputs, expected {len(refs)}")
    for i, (r, c) in enumerate(zip(refs, news)):
        if not isinstance(r, torch.Tensor):
            if type(c) is not type(r) or r != c:
                return _fail(res, "incorrect", f"output {i}: {c!r} != {r!r}")
            continue
        if _compare_tensor(i, r, c, atol, rtol, close_fraction, outlier_factor, res, mode) is not None:
            break
    res["max_abs_err"] = _finite(res["max_abs_err"]) if res["max_abs_err"] is not None else None
    res["max_rel_err"] = _finite(res["max_rel_err"]) if res["max_rel_err"] is not None else None
    return res


def degenerate(ref, atol: float | None, rtol: float | None,  # type: ignore[no-untyped-def]
               close_fraction: float, mode: float | None = None) -> str | None:
    """Why a trivial candidate would pass against this reference output, or None.

    All-zero, constant, all-non-finite, or (within tolerance) a constant for the required share of
    elements: a candidate returning zeros or a constant would then pass without computing anything.
    """
    for i, r in enumerate(tensors(ref)):
        if r.numel() == 0 or r.dtype == torch.bool and r.numel() < 2:
            continue
        r64 = r.detach().to(torch.complex128 if r.is_complex() else torch.float64)
        finite = ~(r64.isnan() | r64.isinf())
        if not bool(finite.any()):
            return f"output {i} is NaN/Inf everywhere"
        if not bool(r64.ne(0).any()):
            return f"output {i} is all zeros"
        if r.numel() < 2:
            continue
        if bool(r64.eq(r64.flatten()[0]).all()):
            return f"output {i} is the constant {r64.flatten()[0].item():.6g}"
        if r.is_complex():
            continue
        a, b = tolerance(r.dtype, atol, rtol, mode)
        c = r64.median() if bool(finite.all()) else r64[finite].median()  # the same value: no masked copy
        flat = r64.reshape(-1)
        within = sum(int(((part - c).abs() <= part.abs().mul_(b).add_(a)).sum())
                     for part in flat.split(_step(flat)))
        share = within / flat.numel()
        if share >= close_fraction:
            return (f"output {i} is within the tolerance (atol={a:g}, rtol={b:g}) of the constant "
                    f"{c.item():.6g} for {share:.2%} of its elements")
    return None


def triton_hint(exc: BaseException) -> str:
    """A first line that says what a Triton failure without a GPU means: Triton picks its backend
    from the active driver, and with none (a CPU-only machine, or no CUDA/ROCm visible) every
    ``@triton.jit`` launch and every ``@triton.autotune`` benchmark fails with a bare
    "0 active drivers" deep inside Triton."""
    text = f"{type(exc).__name__}: {exc}"
    if "active drivers" in text or "no GPU driver" in text.lower():
        return (" Triton found no GPU driver (0 active drivers): @triton.jit / @triton.autotune kernels need "
                "a CUDA or ROCm GPU (Triton's CPU interpreter, TRITON_INTERPRET=1, is a test-only setting)")
    return ""

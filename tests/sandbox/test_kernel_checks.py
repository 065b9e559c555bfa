"""The harness's comparison, degenerate-problem, integrity and cost rules, tested in process (no
sandbox start)."""

from __future__ import annotations

import threading
import time
import types

import pytest
import torch

from arbor.sandbox.harness import cost, integrity
from arbor.sandbox.harness.fingerprint import fingerprint, gpu_state
from arbor.sandbox.harness.kernel_checks import (
    compare,
    degenerate,
    dense,
    overlaps,
    same_values,
    tolerance,
)
from arbor.sandbox.harness.problem_sizes import SizeError, apply_sizes


def test_compare_accepts_close_and_reports_errors():
    r = torch.ones(4, 4)
    res = compare(r, r + 1e-6, atol=1e-4, rtol=1e-4)
    assert res["ok"] and res["max_abs_err"] == pytest.approx(1e-6, rel=0.1)
    res = compare(r, r + 1e-2, atol=1e-4, rtol=1e-4)
    assert not res["ok"] and res["code"] == "incorrect" and "within" in res["reason"]
    assert res["max_abs_err"] == pytest.approx(1e-2, rel=1e-3)


def test_per_dtype_tolerances_apply_to_each_output():
    assert tolerance(torch.float32, None, None) == (1e-4, 1e-4)
    assert tolerance(torch.bfloat16, None, None) == (1e-2, 1e-2)
    assert tolerance(torch.float16, 0.5, None) == (0.5, 1e-2)  # explicit values win
    assert tolerance(torch.int64, None, None) == (0.0, 0.0)
    r32, r16 = torch.ones(64), torch.ones(64, dtype=torch.float16)
    assert not compare(r32, r32 + 5e-3)["ok"]  # 5e-3 is far outside fp32's 1e-4
    assert compare(r16, r16 + 5e-3)["ok"]  # and inside fp16's 1e-2


def test_a_precision_mode_sets_every_floating_outputs_tolerance():
    """KernelBench compares every output at the mode's tolerance: an fp32 output of a bf16-mode
    problem gets 1e-2, a float64 output of an fp32-mode problem 1e-4; integers stay exact."""
    assert tolerance(torch.float32, None, None, mode=1e-2) == (1e-2, 1e-2)
    assert tolerance(torch.float64, None, None, mode=1e-4) == (1e-4, 1e-4)
    assert tolerance(torch.int64, None, None, mode=1e-2) == (0.0, 0.0)
    assert tolerance(torch.float32, 0.5, None, mode=1e-2) == (0.5, 1e-2)  # explicit values still win
    r = torch.ones(64)
    assert compare(r, r + 5e-3, mode=1e-2)["ok"] and not compare(r, r + 5e-3, mode=1e-4)["ok"]
    assert degenerate(torch.full((64,), 1.0) + torch.linspace(0, 1e-3, 64), None, None, 0.99, mode=1e-2)
    assert degenerate(torch.full((64,), 1.0) + torch.linspace(0, 1e-3, 64), None, None, 0.99, mode=1e-4) is None


def test_share_within_tolerance_and_outliers():
    r = torch.linspace(1, 2, 1000)
    c = r.clone()
    c[:5] += 3e-4  # 0.5% slightly out: rounding-like, allowed at 99%
    assert compare(r, c, close_fraction=0.99)["ok"]
    assert not compare(r, c, close_fraction=1.0)["ok"]
    c[0] += 1.0  # one element far out (a broken tail): never allowed
    res = compare(r, c, close_fraction=0.99)
    assert not res["ok"] and "10x the tolerance" in res["reason"]
    c = r.clone()
    c[:20] += 3e-4  # 2% out
    assert "98.00% of elements" in compare(r, c, close_fraction=0.99)["reason"]


def test_compare_nan_inf_zero_constant_shape_dtype_subclass_tuple():
    r = torch.tensor([1.0, float("inf"), float("nan")])
    assert compare(r, r.clone(), 1e-4, 1e-4)["ok"]  # equal inf and matching NaN are fine
    bad = r.clone()
    bad[0] = float("nan")
    assert "NaN/Inf" in compare(r, bad, 1e-4, 1e-4)["reason"]
    x = torch.randn(64) * 1e-5  # zeros would pass atol=1e-4 ...
    assert "all zeros" in compare(x, torch.zeros(64))["reason"]  # ... but are rejected
    y = torch.full((64,), 0.5) + torch.randn(64) * 1e-5
    assert "constant" in compare(y, torch.full((64,), 0.5))["reason"]
    assert "shape" in compare(torch.ones(2, 3), torch.ones(3, 2), 1e-4, 1e-4)["reason"]
    assert not compare(torch.ones(2), torch.ones(2, dtype=torch.float64), 1e-4, 1e-4)["ok"]

    class Fake(torch.Tensor):
        pass

    res = compare(torch.ones(2), torch.ones(2).as_subclass(Fake), 1e-4, 1e-4)
    assert "Fake" in res["reason"] and res["code"] == "hack_suspected"
    assert compare((torch.ones(2), torch.zeros(1)), [torch.ones(2), torch.zeros(1)], 0, 0)["ok"]
    assert "outputs" in compare((torch.ones(2), torch.ones(2)), torch.ones(2), 0, 0)["reason"]


def test_expanded_outputs_are_not_materialized():
    r = torch.randn(1, 8).expand(4, 8).contiguous()
    fake = r[:1].expand(4, 8)  # same values, one row of memory
    res = compare(r, fake)
    assert not res["ok"] and res["code"] == "hack_suspected" and "expanded" in res["reason"]
    assert dense(torch.randn(2, 3, 4, 5).permute(0, 2, 3, 1))  # NHWC-style layouts are fine
    assert compare(r, r.t().contiguous().t())["ok"]
    assert not dense(fake)


def test_degenerate_reference_detection():
    assert "all zeros" in degenerate(torch.zeros(8, 8), None, None, 0.99)
    assert "constant" in degenerate(torch.full((8, 8), 3.0), None, None, 0.99)
    assert "NaN/Inf" in degenerate(torch.full((4,), float("nan")), None, None, 0.99)
    tiny = torch.randn(1000) * 1e-6  # every element within atol of 0
    assert "within the tolerance" in degenerate(tiny, None, None, 0.99)
    assert degenerate(torch.randn(1000), None, None, 0.99) is None
    assert degenerate(torch.relu(torch.randn(1000)), None, None, 0.99) is None  # half zeros is fine
    assert degenerate(torch.tensor(2.5), None, None, 0.99) is None  # a scalar loss


def test_values_and_overlap_helpers():
    a = torch.tensor([1.0, float("nan")])
    assert same_values(a, a.clone()) and not same_values(a, torch.tensor([1.0, 2.0]))
    base = torch.zeros(10)
    assert overlaps(base[:5], base[4:]) and not overlaps(base, torch.zeros(10))


def test_apply_sizes_scale_and_overrides():
    mod = types.SimpleNamespace(batch_size=32, dim=256, k=3, flag=True, __name__="m")
    applied = apply_sizes(mod, {"batch_size": 4}, 0.25)
    assert applied == {"batch_size": 4, "dim": 64}
    assert (mod.batch_size, mod.dim, mod.k, mod.flag) == (4, 64, 3, True)
    assert apply_sizes(types.SimpleNamespace(n=20), {}, 0.01) == {"n": 1}  # never below 1
    with pytest.raises(SizeError, match="dimm"):
        apply_sizes(types.SimpleNamespace(dim=16), {"dimm": 8}, None)


def test_fingerprint_fields():
    fp = fingerprint("cpu")
    for key in ("host", "platform", "python", "torch", "cpu_model", "cpu_count", "governor",
                "num_threads", "device", "device_name"):
        assert key in fp
    assert fp["torch"] == torch.__version__ and fp["device"] == "cpu"
    assert gpu_state("cpu") == {}


def test_identity_snapshot_sees_patches_but_not_torch_wrappers():
    snap = integrity.IdentitySnapshot({"mod": types.SimpleNamespace(f=len)})
    assert snap.changed() == []
    original = time.perf_counter_ns
    try:
        time.perf_counter_ns = lambda: 0
        assert "time.perf_counter_ns" in snap.changed()
    finally:
        time.perf_counter_ns = original
    assert snap.changed() == []
    # a wrapper whose code lives inside torch and wraps the original is torch's own (dynamo does this)
    from torch._compile import _disable_dynamo

    old = torch.nn.functional.gelu
    try:
        torch.nn.functional.gelu = _disable_dynamo(old)
        assert snap.changed() == []
        torch.nn.functional.gelu = lambda x: old(x)
        assert snap.changed() == ["torch.nn.functional.gelu"]
    finally:
        torch.nn.functional.gelu = old


def test_global_state_changes_are_listed():
    before = integrity.global_state()
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium" if old != "medium" else "high")
        diff = integrity.state_changes(before, integrity.global_state())
        assert any(d.startswith("float32_matmul_precision:") for d in diff)
    finally:
        torch.set_float32_matmul_precision(old)
    assert integrity.state_changes(before, integrity.global_state()) == []


def test_process_audit_sees_busy_threads():
    audit = integrity.ProcessAudit()
    assert audit.quiet(0.05)["other_threads_cpu_s"] < 0.04
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            sum(range(1000))

    t = threading.Thread(target=spin, name="spinner", daemon=True)
    t.start()
    try:
        q = audit.quiet(0.2)
        assert q["other_threads_cpu_s"] > 0.05  # generous: a loaded CI box still gives it some CPU
        assert audit.report()["py_threads_new"] == ["spinner"]
    finally:
        stop.set()
        t.join()


def test_poison_fills_reused_memory():
    x = torch.randn(4096)
    y = x * 2
    addr = y.data_ptr()
    del y
    integrity.poison([x], float("nan"))
    z = torch.empty(4096)
    if z.data_ptr() == addr:  # the allocator reused the block (glibc does, for this size)
        assert bool(z[100:].isnan().all())


def test_reference_cost_counts_bytes_and_matmul_flops():
    lin = torch.nn.Linear(64, 32, bias=False)
    x = torch.randn(16, 64)
    with torch.no_grad():
        out = lin(x)
        c = cost.reference_cost(lin, [x], out)
    assert c["bytes"] == (16 * 64 + 16 * 32) * 4 and c["dtype"] == "float32"
    assert c["flops"] == 2 * 16 * 64 * 32


def test_ratio_halfwidth_says_when_more_rounds_would_still_narrow_the_ci():
    """Load that scales whole rounds leaves the paired ratio pinned; noise on one side does not."""
    import random

    from arbor.sandbox.harness import timing

    rng = random.Random(0)
    load = [1 + 2 * rng.random() for _ in range(40)]
    tight = timing.ratio_halfwidth([2 * x * (1 + 0.005 * rng.gauss(0, 1)) for x in load], load)
    noisy = timing.ratio_halfwidth([2 * (1 + 0.2 * rng.gauss(0, 1)) for _ in load], [1.0] * 40)
    assert tight < 0.01 < 0.02 < noisy
    assert timing.ratio_halfwidth([1.0] * 4, [1.0] * 4) == float("inf")


def _module(tmp_path, source: str):
    import importlib.util

    path = tmp_path / "prob.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("prob_sizes", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_derived_size_globals_follow_overrides_and_scale(tmp_path):
    src = ("in_features = 1024\nout_features = 4096\nbias_shape = (out_features,)\n"
           "hidden = in_features * 2\ncalls = []\nheight, width = 32, 64\n")
    mod = _module(tmp_path, src)
    warnings = []
    applied = apply_sizes(mod, {"out_features": 64}, None, warnings)
    assert applied == {"out_features": 64}
    assert mod.bias_shape == (64,) and mod.hidden == 2048 and warnings == []
    mod = _module(tmp_path, src)
    applied = apply_sizes(mod, {}, 0.25, warnings)
    # literal sizes are scaled; the derived int is recomputed from them, not scaled on its own
    assert applied == {"in_features": 256, "out_features": 1024, "height": 8, "width": 16}
    assert (mod.hidden, mod.bias_shape) == (512, (1024,))


def test_derived_global_that_cannot_follow_is_named(tmp_path):
    src = ("n = 4096\nif True:\n    shape = (n, 2)\ncount = 1\ncount += n\n"
           "def make(k=n):\n    return k\nok = n // 2\n")
    mod = _module(tmp_path, src)
    warnings = []
    apply_sizes(mod, {"n": 64}, None, warnings)
    assert mod.ok == 32
    assert len(warnings) == 1
    for name in ("shape", "count", "make() default"):
        assert name in warnings[0]


def test_bad_reference_outputs_named():
    import torch

    from arbor.sandbox.harness.kernel_checks import bad_reference_output

    assert bad_reference_output(None) == "returned None"
    assert "not a tensor" in bad_reference_output(3.0)
    assert "None as output 1" in bad_reference_output((torch.ones(2), None))
    assert bad_reference_output((torch.ones(2), 3)) is None


def test_scaled_sizes_stay_multiples_of_their_divisors(tmp_path):
    """GroupNorm(num_groups, out_channels): a scale must not leave out_channels indivisible by the
    unscaled num_groups (the reference itself would fail). Only the constructor's arguments
    constrain each other (a batch of 16 is not bound to 8 input channels), incidental divisibility
    costs at most a factor two, and user overrides are never changed."""
    src = ("batch_size = 16\nin_channels = 8\nout_channels = 32\nheight = 64\nnum_groups = 8\nembed = 96\n"
           "heads = 12\ndef get_init_inputs():\n    return [in_channels, out_channels, num_groups, embed, heads]\n")
    mod = _module(tmp_path, src)
    applied = apply_sizes(mod, {}, 0.12)
    assert mod.out_channels % mod.num_groups == 0 and mod.out_channels == 8  # 3.84 -> 8, not 4
    assert mod.embed % mod.heads == 0 and mod.embed <= 24
    assert (applied["batch_size"], applied["height"]) == (2, 8)  # input sizes scale freely
    mod = _module(tmp_path, src)
    assert apply_sizes(mod, {"out_channels": 12}, 0.5)["out_channels"] == 12  # the user's override stands
    mod = _module(tmp_path, "a = 4096\nb = 64\nc = 128\nd = 256\ne = 1024\n")
    applied = apply_sizes(mod, {}, 0.3)
    assert 0.5 * 1229 <= applied["a"] <= 2 * 1229  # no lcm blow-up from incidental divisors


def _compare_by_definition(r: torch.Tensor, c: torch.Tensor, atol, rtol, fraction: float, outlier: float) -> dict:
    """The comparison's rules written plainly (one float64 expression each): the fast
    implementation must give exactly this answer, field for field."""
    import math

    from arbor.sandbox.harness.kernel_checks import tolerance

    a, b = tolerance(r.dtype, atol, rtol)
    r64 = r.to(torch.complex128 if r.is_complex() else torch.float64)
    c64 = c.to(r64.dtype)
    same = (r64.isnan() & c64.isnan()) | r64.eq(c64)
    diff = (c64 - r64).abs().masked_fill(same, 0.0)
    bound = a + b * r64.abs()
    res = {"ok": True, "code": None, "reason": None, "close_fraction": None,
           "max_abs_err": float(diff.nan_to_num(nan=math.inf).max()),
           "max_rel_err": float((diff / r64.abs().clamp_min(1e-12)).nan_to_num(nan=math.inf).max())}
    finite_r = ~(r64.isnan() | r64.isinf())
    bad = finite_r & (c64.isnan() | c64.isinf())
    share = float((same | (diff <= bound)).double().mean())
    far = int((~same & (diff > bound * outlier)).sum())
    if bool(bad.any()):
        res.update(ok=False, reason="NaN/Inf")
    elif c.numel() > 1 and bool(finite_r.all()) and not bool(c64.ne(0).any()) and bool(r64.ne(0).any()):
        res.update(ok=False, reason="all zeros")
    elif c.numel() > 1 and bool(finite_r.all()) and bool(c64.eq(c64.flatten()[0]).all()) \
            and not bool(r64.eq(r64.flatten()[0]).all()):
        res.update(ok=False, reason="constant")
    else:
        res["close_fraction"] = share
        if share < fraction:
            res.update(ok=False, reason="share")
        elif far:
            res.update(ok=False, reason="far")
    for k in ("max_abs_err", "max_rel_err"):
        res[k] = res[k] if math.isfinite(res[k]) else None
    return res


@pytest.mark.parametrize("chunk", [None, 3, 64])
def test_the_fast_comparison_gives_the_definitions_answer_exactly(chunk, monkeypatch):
    """Also in chunks smaller than the outputs (the CPU path compares 2^16 elements at a time):
    a NaN, an outlier, a zero or a constant in any chunk but the first gives the same answer."""
    import random

    from arbor.sandbox.harness import kernel_checks

    if chunk is not None:
        monkeypatch.setattr(kernel_checks, "_CHUNK", chunk)

    rng = random.Random(0)
    for k in range(600):
        g = torch.Generator().manual_seed(k)
        n = rng.choice([1, 2, 7, 100, 1000])
        r = torch.randn(n, generator=g)
        c = r + torch.randn(n, generator=g) * rng.choice([0, 1e-7, 1e-5, 1e-3, 1e-1, 1])
        kind = rng.choice(["noise", "nan", "inf", "zero", "const", "same", "few", "negzero", "huge"])
        idx = torch.randint(0, n, (max(1, n // 10),), generator=g)
        if kind in ("nan", "inf"):
            c[idx] = float(kind)
            if rng.random() < 0.5:
                r[idx] = float(kind) if rng.random() < 0.7 else -float(kind)
        elif kind == "zero":
            c = torch.zeros(n)
        elif kind == "const":
            c = torch.full((n,), 0.5)
        elif kind == "same":
            c = r.clone()
        elif kind == "few":
            c = r.clone()
            c[: max(1, n // 200)] += 1
        elif kind == "negzero":
            r, c = torch.zeros(n), -torch.zeros(n)
        elif kind == "huge":
            r, c = r * 1e30, c * 1e30
        dtype = rng.choice([torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.complex64])
        r, c = r.to(dtype), c.to(dtype)
        atol, rtol = rng.choice([None, 0.0, 1e-3]), rng.choice([None, 0.0, 1e-2])
        fraction, outlier = rng.choice([1.0, 0.99, 0.5]), rng.choice([10.0, 1.0])
        got = compare(r, c, atol, rtol, fraction, outlier)
        want = _compare_by_definition(r, c, atol, rtol, fraction, outlier)
        what = f"case {k} ({kind}, {dtype})"
        assert got["ok"] == want["ok"], (what, got, want)
        assert (got["max_abs_err"], got["max_rel_err"]) == (want["max_abs_err"], want["max_rel_err"]), (what, got, want)
        if want["reason"] not in ("NaN/Inf", "all zeros", "constant"):
            assert got["close_fraction"] == want["close_fraction"], (what, got, want)
        if not want["ok"]:
            phrase = {"share": "of elements within", "far": "off by more than", "all zeros": "all zeros",
                      "constant": "constant, the reference"}.get(want["reason"], "NaN/Inf values")
            assert phrase in got["reason"], (what, got, want)

"""The harness's comparison and size rules, tested in process (no sandbox start)."""

from __future__ import annotations

import types

import pytest
import torch

from arbor.sandbox.harness.kernel_checks import SizeError, apply_sizes, compare, fingerprint


def test_compare_accepts_close_and_reports_errors():
    r = torch.ones(4, 4)
    res = compare(r, r + 1e-6, atol=1e-4, rtol=1e-4)
    assert res["ok"] and res["max_abs_err"] == pytest.approx(1e-6, rel=0.1)
    res = compare(r, r + 1e-2, atol=1e-4, rtol=1e-4)
    assert not res["ok"] and "differ" in res["reason"]
    assert res["max_abs_err"] == pytest.approx(1e-2, rel=1e-3)


def test_compare_nan_inf_shape_dtype_subclass_tuple():
    r = torch.tensor([1.0, float("inf"), float("nan")])
    assert compare(r, r.clone(), 1e-4, 1e-4)["ok"]  # equal inf and matching NaN are fine
    bad = r.clone()
    bad[0] = float("nan")
    assert "NaN" in compare(r, bad, 1e-4, 1e-4)["reason"]
    assert "shape" in compare(torch.ones(2, 3), torch.ones(3, 2), 1e-4, 1e-4)["reason"]
    assert not compare(torch.ones(2), torch.ones(2, dtype=torch.float64), 1e-4, 1e-4)["ok"]

    class Fake(torch.Tensor):
        pass

    assert "Fake" in compare(torch.ones(2), torch.ones(2).as_subclass(Fake), 1e-4, 1e-4)["reason"]
    assert compare((torch.ones(2), torch.zeros(1)), [torch.ones(2), torch.zeros(1)], 0, 0)["ok"]
    assert "outputs" in compare((torch.ones(2), torch.ones(2)), torch.ones(2), 0, 0)["reason"]


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

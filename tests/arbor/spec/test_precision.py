"""``target.precision``: KernelBench's precision modes, their tolerances, and old ``dtype`` files."""

from __future__ import annotations

import pytest

from arbor.spec import SpecError, load_spec, precision_of


def spec(tmp_path, target: str):
    p = tmp_path / "c.yaml"
    p.write_text(f"name: x\ntarget: {{problem: p.py{target}}}\n")
    return load_spec(p)


@pytest.mark.parametrize("target, mode, dtype, tol", [
    ("", "fp32", "float32", 1e-4),  # the default: KernelBench's fp32 mode
    (", precision: fp32", "fp32", "float32", 1e-4),
    (", precision: fp16", "fp16", "float16", 1e-2),
    (", precision: bf16", "bf16", "bfloat16", 1e-2),
])
def test_each_mode_casts_to_its_dtype_with_kernelbenchs_tolerance(tmp_path, target, mode, dtype, tol):
    t = spec(tmp_path, target).target
    assert (t.precision, t.dtype, t.tolerances()) == (mode, dtype, (tol, tol))


def test_explicit_tolerances_still_win(tmp_path):
    assert spec(tmp_path, ", precision: bf16, atol: 0.05").target.tolerances() == (0.05, 1e-2)


@pytest.mark.parametrize("dtype, mode", [("float32", "fp32"), ("float16", "fp16"), ("bfloat16", "bf16"),
                                         ("float64", "fp64")])
def test_old_dtype_files_stay_valid(tmp_path, dtype, mode):
    t = spec(tmp_path, f", dtype: {dtype}").target
    assert t.precision == mode and t.dtype == dtype
    assert "dtype" not in t.model_dump()  # stored once, as the precision


def test_bad_or_disagreeing_settings_are_one_line_each(tmp_path):
    with pytest.raises(SpecError, match="target.precision"):
        spec(tmp_path, ", precision: fp8")
    with pytest.raises(SpecError, match="dtype float16 and precision bf16 disagree"):
        spec(tmp_path, ", dtype: float16, precision: bf16")
    with pytest.raises(SpecError, match="dtype 'int8' is not one of"):
        spec(tmp_path, ", dtype: int8")
    assert spec(tmp_path, ", dtype: bfloat16, precision: bf16").target.precision == "bf16"


def test_the_mode_is_read_back_from_any_stored_spec():
    assert precision_of({"kind": "kernel", "precision": "bf16"}) == "bf16"
    assert precision_of({"kind": "kernel", "dtype": "float16"}) == "fp16"  # a store from before precision
    assert precision_of({"kind": "kernel", "dtype": None}) == "fp32"
    assert precision_of({"kind": "serving"}) is None and precision_of(None) is None

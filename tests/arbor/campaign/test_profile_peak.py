"""The peak a GPU profile's fractions are read against follows the precision mode: in fp32 mode
TF32 is forbidden, so an fp32 GEMM at the fp32 rate is at its peak, not at an eighth of TF32's."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from arbor.campaign.profiling import _peak
from arbor.sandbox.gpu import gpu_peak
from arbor.spec import parse_spec

H100 = {"gpu_name": "NVIDIA H100 80GB HBM3"}


@pytest.mark.parametrize("precision, rate", [("fp32", "fp32_flops"), ("bf16", "half_flops"), ("fp16", "half_flops")])
def test_the_profiles_flop_peak_is_the_modes(tmp_path: Path, precision, rate):
    spec = parse_spec({"name": "x", "target": {"problem": "p.py", "device": "cuda", "precision": precision}},
                      str(tmp_path / "c.yaml"), tmp_path)
    peak = _peak(SimpleNamespace(spec=spec), None, H100)
    assert peak["flops_per_s"] == getattr(gpu_peak(H100["gpu_name"]), rate)
    assert _peak(SimpleNamespace(spec=spec), None, {"gpu_name": "a GPU no table knows"}) is None

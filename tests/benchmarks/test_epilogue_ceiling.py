"""benchmarks/epilogue_ceiling.py: the bound on what epilogue work can gain around a library GEMM."""

from __future__ import annotations

import math

from benchmarks.epilogue_ceiling import ceiling, chains


def test_the_ceiling_is_what_remains_if_everything_outside_gemm_and_conv_were_free():
    share, ceil = ceiling({"gemm": 0.80, "elementwise": 0.15, "layout": 0.05})
    assert math.isclose(share, 0.80) and math.isclose(ceil, 1.25)
    share, ceil = ceiling({"conv": 0.5, "gemm": 0.25, "norm": 0.25})
    assert math.isclose(share, 0.75) and math.isclose(ceil, 4 / 3)
    assert ceiling({"elementwise": 1.0}) == (0, math.inf)  # nothing a library owns: no bound


def test_the_chains_are_the_sets_l2_problems_without_its_collapses():
    names = [p.stem for p in chains(None)]
    assert names and all(n.startswith("l2_") for n in names)
    assert not any(n.startswith(("l2_03_", "l2_05_")) for n in names)
    assert [p.stem for p in chains(["l1_01"])] == ["l1_01_relu"]

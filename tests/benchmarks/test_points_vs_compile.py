"""benchmarks/points_vs_compile.py: its input is checked before anything is built (a one-line
error and exit 2); the timing itself runs by hand on a quiet core (docs/performance.md)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks import points_vs_compile as pvc
from benchmarks.common import ROOT


def test_a_point_is_knob_value_pairs():
    assert pvc.parse_point("default") == {}
    assert pvc.parse_point("unroll=1,block=1024") == {"unroll": 1, "block": 1024}
    with pytest.raises(SystemExit, match="knob=integer pairs"):
        pvc.parse_point("unroll")


def test_a_missing_problem_is_one_line_and_exit_2(tmp_path, capsys):
    assert pvc.main([str(tmp_path / "nope.py")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no problem file at") and "\n" not in err


def test_a_problem_without_a_generated_kernel_is_refused(tmp_path):
    conv = tmp_path / "conv.py"
    conv.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                    "    def __init__(self):\n        super().__init__()\n        self.c = nn.Conv2d(3, 8, 3)\n\n"
                    "    def forward(self, x):\n        return self.c(x)\n\n"
                    "def get_inputs():\n    return [torch.randn(1, 3, 16, 16)]\n\n"
                    "def get_init_inputs():\n    return []\n")
    # as a user runs it, in its own process (it pins the host allocator, process-wide)
    run = subprocess.run([sys.executable, "-m", "benchmarks.points_vs_compile", str(conv), "--no-compile"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and "no generated C++ kernel" in run.stderr and "Traceback" not in run.stderr

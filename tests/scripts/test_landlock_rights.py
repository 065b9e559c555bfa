"""scripts/landlock_rights.py, the right-by-right bisect of the Landlock filesystem rules for a GPU driver."""

from __future__ import annotations

import ctypes.util
import json
import subprocess
import sys
from pathlib import Path

import pytest


def test_the_landlock_bisect_says_where_to_run_it_without_a_driver(tmp_path):
    """scripts/landlock_rights.py on a machine without libcuda: one JSON line saying so, exit 0
    (with a driver, each variant is a forked child under the sandbox's ruleset plus one grant)."""
    root = Path(__file__).parents[2]
    if ctypes.util.find_library("cuda") is not None:
        pytest.skip("a CUDA driver is here: the bisect would really run")
    out = subprocess.run([sys.executable, str(root / "scripts" / "landlock_rights.py")], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "run this on the GPU host" in json.loads(out.stdout)["error"]

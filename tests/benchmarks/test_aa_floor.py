"""benchmarks/aa_floor.py: A/A floors per batch length, for the next GPU lease (checked here on the CPU)."""

from __future__ import annotations

import json

import pytest

import benchmarks.aa_floor as aa
import benchmarks.common as common


# timing: a tiny A/A must read stable (failed 0); beside another worker's build on 2 cores it read
# "unstable" (2026-12-02)
@pytest.mark.timing
def test_each_arm_is_one_judged_aa_measurement_and_the_table_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    small = tmp_path / "small.py"
    small.write_text((aa.PROBLEM.read_text()).replace("batch_size = ", "batch_size = 8  # ").replace(
        "dim = ", "dim = 64  # "))
    assert aa.main(["--device", "cpu", "--problem", str(small), "--batch-ms", "10,20", "--budget-s", "0.2"]) == 0
    data = json.loads((tmp_path / "aa_floor_cpu.json").read_text())
    assert [(r["batch_ms"], r["budget_s"], r["failed"]) for r in data["rows"]] == [(10.0, 0.2, 0), (20.0, 0.2, 0)]
    assert all(r["floor_pct"] is not None and r["rounds"] >= 2 for r in data["rows"])
    assert data["load_avg_before"] and "A/A floor %" in capsys.readouterr().out


def test_bad_arguments_are_one_line():
    assert aa.main(["--device", "cpu", "--batch-ms", "ten"]) == 2

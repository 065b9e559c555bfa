"""`arbor redteam` as a user runs it: bad input is one line and exit 2; a small live run prints the
per-class table, writes its JSON and exits 0 when nothing got through."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.arbor.helpers import arbor

ROOT = Path(__file__).parents[3]
ACT = ROOT / "tests" / "adversarial" / "problems" / "act.py"


@pytest.mark.parametrize("args, message", [
    (("nope.py",), "file not found: nope.py"),
    ((str(ACT), "--classes", "99"), "unknown class 99"),
    ((str(ACT), "--disguises", "smoke"), "unknown disguise smoke"),
    ((str(ACT), "--llm", "http://127.0.0.1:9/v1"), "--llm needs --llm-model"),
])
def test_bad_input_is_one_line_and_exit_2(args, message):
    r = arbor("redteam", *args, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_small_run_reports_and_writes_json(tmp_path):
    r = arbor("redteam", str(ACT), "--classes", "10,21", "--disguises", "getattr", "--per-combo", "1",
              "--twins", "0", "-o", str(tmp_path), timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "by class" in r.stdout and "attack success 0%" in r.stdout
    data = json.loads((tmp_path / "redteam.json").read_text())
    assert (data["hostile"], data["accepted"], data["classes"]) == (2, 0, 2)
    assert {v["diagnosis"] for v in data["variants"]} <= {"hack_suspected", "incorrect"}

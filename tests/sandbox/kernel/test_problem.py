"""Problem loader: every failure is a one-line ProblemError naming the file and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from arbor.sandbox.kernel.problem import ProblemError, load_problem

DATA = Path(__file__).parents[1] / "data"


def _write(tmp_path: Path, source: str) -> Path:
    p = tmp_path / "prob.py"
    p.write_text(source)
    return p


def _one_line_error(path: Path) -> str:
    with pytest.raises(ProblemError) as info:
        load_problem(path)
    msg = str(info.value)
    assert "\n" not in msg and "prob" in msg
    return msg


def test_valid_problem_loads():
    p = load_problem(DATA / "gelu_problem.py")
    assert p.name == "gelu_problem" and "class Model" in p.source and p.path.is_absolute()


def test_missing_file(tmp_path):
    msg = _one_line_error(tmp_path / "prob.py")
    assert msg.startswith("problem file not found") and "target.problem" in msg


def test_syntax_error_names_line(tmp_path):
    msg = _one_line_error(_write(tmp_path, "import torch\n\ndef get_inputs(:\n    pass\n"))
    assert "line 3" in msg


@pytest.mark.parametrize("missing", ["Model", "get_inputs", "get_init_inputs"])
def test_missing_required_name(tmp_path, missing):
    parts = {
        "Model": "class Model:\n    pass\n",
        "get_inputs": "def get_inputs():\n    return []\n",
        "get_init_inputs": "def get_init_inputs():\n    return []\n",
    }
    src = "\n".join(v for k, v in parts.items() if k != missing)
    msg = _one_line_error(_write(tmp_path, src))
    assert f"`{'class Model' if missing == 'Model' else missing}" in msg
    assert "KernelBench problem needs Model, get_inputs and get_init_inputs" in msg


def test_not_executed(tmp_path):
    src = ("raise SystemExit('executed!')\nclass Model: pass\n"
           "def get_inputs(): return []\ndef get_init_inputs(): return []\n")
    assert load_problem(_write(tmp_path, src)).name == "prob"

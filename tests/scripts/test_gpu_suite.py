"""scripts/gpu_suite.sh: the offline install from a wheelhouse, its one-line errors, and (slow) the
CPU dry run end to end — the GPU development set at a tiny size, its generated Triton kernels
checked and measured in a campaign through Triton's interpreter, the suite's table and JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_suite.sh"


def _run(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=ROOT)


def _fake_python(tmp_path: Path) -> tuple[Path, Path]:
    """A PYTHON that records each command line instead of running it."""
    log = tmp_path / "calls.log"
    fake = tmp_path / "python3"
    fake.write_text(f'#!/usr/bin/env bash\necho "$*" >> {log}\n')
    fake.chmod(0o755)
    return fake, log


def test_wheelhouse_installs_offline_then_runs_the_suite_with_the_other_arguments(tmp_path: Path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "a-1.0-py3-none-any.whl").write_bytes(b"")
    (wheels / "b-2.0-py3-none-any.whl").write_bytes(b"")
    fake, log = _fake_python(tmp_path)
    res = _run("--wheelhouse", str(wheels), "--ids", "1,2", "--budget", "3",
               env={"PYTHON": str(fake), "ARBOR_WHEELHOUSE": ""})
    assert res.returncode == 0, res.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == f"scripts/wheelhouse.py install {wheels}"  # each wheel only where missing or older
    assert calls[1] == "-m pip install --no-index --no-deps --no-build-isolation -e ."
    assert calls[2] == "-c import arbor.cli, arbor.suite.run"  # installed: Arbor imports
    assert calls[3] == "-m benchmarks.gpu_suite --ids 1,2 --budget 3"
    log.unlink()
    assert _run(env={"PYTHON": str(fake), "ARBOR_WHEELHOUSE": str(wheels)}).returncode == 0  # from the environment
    assert len(log.read_text().splitlines()) == 4


def test_no_install_without_a_wheelhouse_and_a_clear_line_for_an_empty_one(tmp_path: Path):
    fake, log = _fake_python(tmp_path)
    assert _run(env={"PYTHON": str(fake), "ARBOR_WHEELHOUSE": ""}).returncode == 0
    assert log.read_text().splitlines() == ["-m benchmarks.gpu_suite"]
    res = _run("--wheelhouse", str(tmp_path), env={"PYTHON": str(fake), "ARBOR_WHEELHOUSE": ""})
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        f"gpu_suite.sh: no wheels in {tmp_path} (build them with scripts/wheelhouse.sh)"]


def test_without_a_gpu_it_says_to_use_the_dry_run():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the real run would start")
    res = _run(env={"PYTHON": sys.executable, "ARBOR_GPU_SUITE_DRY": "0", "ARBOR_WHEELHOUSE": ""})
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "gpu_suite: no CUDA device here; run it on a GPU host, or ARBOR_GPU_SUITE_DRY=1 for the CPU dry run"]


@pytest.mark.slow
def test_dry_run_exercises_the_suite_and_the_triton_moves_on_cpu(tmp_path: Path):
    out, result = tmp_path / "suite", tmp_path / "gpu_suite_dry.json"
    res = _run("--levels", "1", "--ids", "1", "--out", str(out), "--json", str(result),
               env={"PYTHON": sys.executable, "ARBOR_GPU_SUITE_DRY": "1", "ARBOR_WHEELHOUSE": ""}, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "| l1_01_softmax | 1 | fp32 | 0.03125 |" in res.stdout and "vs best-of" in res.stdout
    data = json.loads(result.read_text())
    assert data["dry_run"] and data["device"] == "cpu" and data["machine"]["load_avg_at_start"]
    assert [r["key"] for r in data["rows"]] == ["l1_01_softmax"] and "error" not in data["rows"][0]
    assert data["rows"][0]["compile"] is not None  # torch.compile measured in the compare column
    kernels = data["kernels"]
    ran = [k for k in kernels if "ok" in k]  # the file's rows of 8192: only the block that holds one is offered
    assert ran and all(k["ok"] for k in ran)  # every variant offered is right under the interpreter
    assert all("holds a row in registers" in k["result"] for k in kernels if "ok" not in k)
    # the campaign measured a generated kernel in the sandbox: guarded, run, checked, judged
    history = subprocess.run([sys.executable, "-m", "arbor", "history",
                              str(out / "campaigns" / "suite-l1_01_softmax.yaml")],
                             capture_output=True, text=True, timeout=120, cwd=ROOT).stdout
    assert "triton-fused" in history, history
    for bad in ("incorrect", "hack_suspected", "runtime_error", "compile_error"):
        assert bad not in history, history


def test_the_suite_deadline_cuts_each_campaign_and_skips_the_rest_saying_so(tmp_path: Path, monkeypatch):
    """The deadline logic with a fake clock and fake problems: each takes 50 s; 130 s allow two."""
    import arbor.suite.run as run
    from arbor.suite.deadline import Deadline

    now, walls, written = [0.0], [], []

    def one_problem(entry, opts, calib, say):  # type: ignore[no-untyped-def]
        walls.append(opts.max_wall_s)
        now[0] += 50.0
        return {"key": entry.key}

    def after_each(rows, skipped):  # type: ignore[no-untyped-def]
        written.append(json.loads((tmp_path / "suite_results.json").read_text())["rows"])

    monkeypatch.setattr(run, "run_one", one_problem)
    monkeypatch.setattr(run, "write_page", lambda *a: tmp_path / "page.html")
    monkeypatch.setattr(run, "summary", lambda rows: {"problems": len(rows)})
    monkeypatch.setattr(run, "markdown", lambda rows, summ: "")
    said: list[str] = []
    opts = run.SuiteOptions(directory=ROOT / "benchmarks" / "problems_gpu", out=tmp_path, max_wall_s=100.0,
                            device="cuda", deadline=Deadline(130.0, clock=lambda: now[0]), compare_s=20.0,
                            min_problem_s=40.0)
    res = run.run_suite(opts, say=said.append, on_row=after_each)
    assert walls == [100.0, 60.0]  # the second campaign gets what is left less its compare job
    assert [r["key"] for r in res["rows"]] == [r["key"] for r in written[-1]] and len(written) == 2
    assert len(res["skipped"]) == 10 and set(res["skipped"].values()) == {
        "skipped: the suite's deadline (130 s) leaves 30 s, a problem needs at least 40 s"}
    assert said == [f"{next(iter(res['skipped']))} and the rest: {next(iter(res['skipped'].values()))}"]
    assert json.loads((tmp_path / "suite_results.json").read_text())["skipped"] == res["skipped"]
    # nothing started is recorded as done: the same command resumes with the skipped problems
    assert all("error" not in r for r in res["rows"])


def test_an_interrupted_suite_says_where_it_stopped(tmp_path: Path, monkeypatch):
    import arbor.suite.run as run

    calls = []

    def one_problem(entry, opts, calib, say):  # type: ignore[no-untyped-def]
        calls.append(entry.key)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the deadline's SIGINT, landing in the second problem
        return {"key": entry.key}

    monkeypatch.setattr(run, "run_one", one_problem)
    opts = run.SuiteOptions(directory=ROOT / "benchmarks" / "problems_gpu", out=tmp_path, device="cuda")
    with pytest.raises(KeyboardInterrupt):
        run.run_suite(opts, say=lambda line: None)
    saved = json.loads((tmp_path / "suite_results.json").read_text())
    assert [r["key"] for r in saved["rows"]] == calls[:1] and saved["interrupted"] == calls[1]

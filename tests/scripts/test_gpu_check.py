"""scripts/gpu_check.sh's control flow against a fake PYTHON (no GPU, seconds): every step under a
limit or skipped and named — never `timeout ""` — and, when the device does not start under the
sandbox, the Landlock bisect and the `filesystem: host` retry run next."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _fake_python(tmp_path: Path, probe_line: str) -> tuple[Path, Path]:
    """Records each command line; the device probe prints ``probe_line``; the check whether a
    campaign stopped at the device says no; everything else succeeds."""
    log = tmp_path / "calls.log"
    fake = tmp_path / "python3"
    fake.write_text(f'#!/usr/bin/env bash\necho "$*" >> {log}\n'
                    f'case "$*" in *device_probe.py*) echo \'{probe_line}\' ;; *"does not start"*) exit 1 ;; esac\nexit 0\n')
    fake.chmod(0o755)
    return fake, log


def _check(tmp_path: Path, budget: int, probe_line: str = '{"chosen": true}') -> tuple[subprocess.CompletedProcess, list[str]]:
    fake, log = _fake_python(tmp_path, probe_line)
    env = {**os.environ, "PYTHON": str(fake), "ARBOR_GPU_CHECK_BUDGET_S": str(budget), "ARBOR_WHEELHOUSE": ""}
    res = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path / "report.json")], capture_output=True,
                         text=True, timeout=60, env=env, cwd=ROOT)
    return res, log.read_text().splitlines()


def test_a_budget_too_small_for_any_step_skips_them_all_by_name(tmp_path: Path):
    res, calls = _check(tmp_path, budget=30)
    assert "timeout: invalid time interval" not in res.stderr + res.stdout
    report = next(c for c in calls if c.startswith("- "))  # the report step: its arguments
    for name in ("device_probe", "doctor", "gpu_quickstart", "gpu_level2", "gpu_tests"):
        assert name in report.split(), report
    assert not any("device_probe.py" in c or "arbor doctor" in c for c in calls)


def test_a_stopped_probe_runs_the_bisect_and_the_filesystem_host_retry(tmp_path: Path):
    res, calls = _check(tmp_path, budget=400, probe_line='{"stop": "cuda does not start under the Landlock filesystem rules"}')
    assert "the device stops under the sandbox" in res.stdout, res.stdout
    assert sum("scripts/landlock_rights.py" in c for c in calls) == 1  # once, however many campaigns stop
    for c in ("gpu_quickstart", "gpu_level2"):
        assert f"-m arbor run campaigns/.lease_{c}_filesystem_host.yaml --json --store" in " ".join(calls)
        assert not (ROOT / f"campaigns/.lease_{c}_filesystem_host.yaml").exists()  # removed after


def test_a_probe_that_starts_the_device_runs_neither(tmp_path: Path):
    _, calls = _check(tmp_path, budget=400)
    assert not any("landlock_rights.py" in c or ".lease_" in c for c in calls)


def test_the_lease_ends_inside_its_budget_with_its_files_whatever_the_steps_do(tmp_path: Path):
    import time

    fake, log = _fake_python(tmp_path, '{"chosen": true}')
    out = tmp_path / "out"
    t0 = time.monotonic()
    res = subprocess.run(["bash", "scripts/gpu_lease.sh", str(out), "45"], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHON": str(fake), "PATH": f"{tmp_path}:{os.environ['PATH']}"},
                         cwd=ROOT)
    assert res.returncode == 0 and time.monotonic() - t0 < 45, res.stdout + res.stderr
    assert {p.name for p in out.iterdir()} >= {"env.txt", "check.log", "suite.log", "lease.txt", "logs.tgz"}
    steps = (out / "lease.txt").read_text()
    assert "install-arbor: rc 0" in steps and "gpu_check: rc" in steps and "of 45]" in steps, steps
    assert "too little for the suite" in (out / "suite.log").read_text()

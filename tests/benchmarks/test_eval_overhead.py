"""The evaluation-overhead benchmark's accounting: every second of an evaluation lands in exactly
one row, and the non-timing cost leaves out the timing rounds and the correctness rounds only."""

from __future__ import annotations

import pytest

from benchmarks.eval_overhead import ROWS, _candidate, account, non_timing


def _record(**over) -> dict:
    job = {"torch_import": 2.0, "harness_modules": 0.1, "device": 0.05, "import": 0.4, "correctness": 1.5,
           "warmup": 0.6, "rounds": 1.5, "spot_checks": 0.2, "after_timing": 0.3, "recheck": 0.8,
           "harness": 7.6, "runner_setup": 0.01, "runner_start": 0.1, "runner_collect": 0.02,
           "runner_cleanup": 0.03, "worker_start": 0.0, "job_wall": 8.0}
    rec = {"measurements": [job], "adapter": 8.3, "runner_run": 8.2, "hooks_before": 0.05, "hooks_after": 0.04,
           "store": 0.02, "critic": 0.05, "profile": 1.0, "knowledge": 0.1, "total": 9.6}
    rec.update(over)
    return rec


def test_every_second_lands_in_one_row():
    acc = account(_record())
    assert set(acc) == {k for k, _ in ROWS} | {"total"}
    assert sum(v for k, v in acc.items() if k != "total") == pytest.approx(acc["total"])
    assert acc["process"] == pytest.approx(0.4)  # the job's wall outside the harness's main()
    assert acc["harness_other"] == pytest.approx(7.6 - 7.45)  # main() outside every mark
    assert acc["after_timing"] == pytest.approx(0.5)  # spot checks + the checks after the rounds
    assert acc["protocol"] == pytest.approx(0.1)  # the adapter around Runner.run
    assert acc["runner_collect"] == pytest.approx(0.05 + (8.2 - 0.09 - 8.06))  # + Runner.run's unmarked rest
    assert acc["loop_other"] == pytest.approx(9.6 - (8.3 + 0.02 + 0.05 + 1.0 + 0.1))


def test_non_timing_leaves_out_only_timing_rounds_and_correctness_rounds():
    acc = account(_record())
    assert non_timing(acc) == pytest.approx(9.6 - 1.5 - 1.5 - 0.8)
    slower_rounds = account(_record(total=10.6, measurements=[{**_record()["measurements"][0], "rounds": 2.5,
                                                                "harness": 8.6, "job_wall": 9.0}],
                                    adapter=9.3, runner_run=9.2))
    assert non_timing(slower_rounds) == pytest.approx(non_timing(acc))  # more timing is not overhead


def test_a_warm_job_has_no_imports_and_its_worker_start_is_its_own_row():
    warm = {**_record()["measurements"][0], "torch_import": 0.0, "harness_modules": 0.0, "harness": 5.5,
            "job_wall": 5.6, "worker_start": 2.5}
    acc = account(_record(measurements=[warm], adapter=8.3, runner_run=8.2, total=9.6))
    assert acc["torch_import"] == 0.0 and acc["worker_start"] == 2.5
    assert acc["process"] == pytest.approx(0.1)


def test_the_candidate_rewrites_only_the_forward():
    ref = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x, gate):\n"
           "        g = x\n        return g * gate\n\ndef get_inputs():\n    return []\n")
    cand = _candidate(ref)
    assert "silu(gate)" in cand and "def get_inputs" in cand and "g = x" not in cand
    compile(cand, "candidate.py", "exec")

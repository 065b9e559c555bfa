"""``arbor suite``: discovery of KernelBench-style files, the table's metrics, and (slow) one
resumable end-to-end run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arbor.campaign.speed_of_light import PEAK_LOW
from arbor.sandbox.kernel.problem import ProblemError
from arbor.suite.discover import discover
from arbor.suite.table import markdown, row_metrics, summary

from tests.arbor.helpers import arbor

PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.sum(self.linear(x), dim=1, keepdim=True)

batch_size = 64
in_features = 64
out_features = 64

def get_inputs():
    return [torch.randn(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features]
'''

GELU = '''
import math
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

batch_size = 64
dim = 256

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
'''


def test_discovers_upstream_layout_and_our_prefix_with_filters(tmp_path: Path):
    (tmp_path / "level1").mkdir()
    (tmp_path / "level2").mkdir()
    (tmp_path / "level1" / "3_Sum.py").write_text(PROBLEM)
    (tmp_path / "level2" / "18_Gemm_Sum.py").write_text(PROBLEM)
    (tmp_path / "l2_07_mine.py").write_text(PROBLEM)
    (tmp_path / "helper.py").write_text("x = 1\n")  # not a problem: skipped
    found = discover(tmp_path)
    assert {(e.level, e.pid) for e in found} == {(1, 3), (2, 18), (2, 7)}
    assert [e.pid for e in discover(tmp_path, levels=[2], ids=[18])] == [18]
    with pytest.raises(ProblemError):
        discover(tmp_path, ids=[999])


def test_metrics_count_only_verified_wins_and_compare_with_compile():
    rows = [{"key": "a", "verified": True, "best": 3.0, "compile": 1.5},
            {"key": "b", "verified": False, "best": 5.0, "compile": 0.8},  # unverified: counts as 1.0
            {"key": "c", "error": "calibration failed"}]
    assert row_metrics(rows[0]) == {"correct": True, "result_ok": True, "speedup_eager": 3.0,
                                    "speedup_compile": 2.0, "speedup_best_of": 2.0, "collapse": None}
    assert row_metrics(rows[1])["speedup_eager"] == 1.0
    s = summary(rows)
    assert s["problems"] == 3 and s["finished"] == 2
    # b ended with the reference kept only if its eager time was measured; c never started
    assert s["verified_fraction"] == pytest.approx(1 / 3) and s["result_fraction"] == pytest.approx(1 / 3)
    assert summary([*rows, {"key": "d", "verified": False, "eager": 1.0, "compile": 1.1}])["result_fraction"] == 0.5
    assert s["fast_1"] == pytest.approx(1 / 3) and s["fast_2"] == pytest.approx(1 / 3)
    assert s["geomean_vs_eager"] == pytest.approx(3 ** 0.5)
    assert "| a |" in markdown(rows, s) and "c: calibration failed" in markdown(rows, s)


def test_the_table_names_each_rows_precision_mode():
    rows = [{"key": "a", "verified": True, "best": 3.0, "compile": 1.5, "precision": "bf16"},
            {"key": "b", "verified": True, "best": 2.0, "compile": 1.5}]  # a row from before precision modes
    s = summary(rows)
    table = markdown(rows, s)
    assert "| precision |" in table.splitlines()[0]
    assert "| a | - | bf16 |" in table and "| b | - | fp32 |" in table
    assert s["precision"] == "bf16, fp32" and "precision bf16, fp32: geomean" in table


@pytest.mark.slow
def test_suite_runs_a_directory_and_resumes(tmp_path: Path):
    (tmp_path / "probs").mkdir()
    (tmp_path / "probs" / "l2_01_gemm_sum.py").write_text(PROBLEM)
    out = tmp_path / "out"
    args = ("suite", str(tmp_path / "probs"), "-o", str(out), "--budget", "1", "--time-target-ms", "2",
            "--max-cv", "2.0")
    first = arbor(*args, timeout=900)
    assert first.returncode == 0, first.stderr
    assert "geomean vs eager" in first.stdout and (out / "suite_report.html").is_file()
    rows = json.loads((out / "suite_results.json").read_text())["rows"]
    assert rows[0]["key"] == "l2_01_gemm_sum" and rows[0]["compile"] is not None
    sol = rows[0]["speed_of_light"]  # a row at 1.000x still says how far its reference is from it
    assert 0 < sol["fraction"] <= 1.0 and sol["bound"] in ("memory", "compute")
    # the reference is never "fewer FLOPs than the reference": beyond its own bound, the peak is low
    assert sol["note"] is None or (sol["note"] == PEAK_LOW and sol["fraction"] == 1.0), sol
    assert f"| {sol['fraction']:.0%} {sol['bound']} |" in (out / "suite_table.md").read_text()
    again = arbor(*args, timeout=300)  # finished problems are not run again
    assert again.returncode == 0 and "l2_01_gemm_sum: scale" not in again.stdout


def test_campaigns_run_on_the_suites_device_at_a_fixed_scale_with_skills_left_out(tmp_path: Path):
    """The GPU suite: cuda campaigns at the files' own sizes (no CPU calibration); its dry run: one
    small scale on the CPU, with skills excluded."""
    from arbor.spec import parse_spec
    from arbor.suite.discover import Entry
    from arbor.suite.run import SuiteOptions, campaign_dict

    (tmp_path / "l2_01_gemm_sum.py").write_text(PROBLEM)
    entry = Entry(tmp_path / "l2_01_gemm_sum.py", 2, 1, "l2_01_gemm_sum")
    gpu = SuiteOptions(directory=tmp_path, out=tmp_path / "o", device="cuda")
    assert gpu.fixed_scale() == 1.0 and SuiteOptions(directory=tmp_path, out=tmp_path).fixed_scale() is None
    data = campaign_dict(entry, gpu.fixed_scale(), gpu)
    assert data["target"]["device"] == "cuda" and data["target"]["size_scale"] == 1.0 and "skills" not in data
    dry = SuiteOptions(directory=tmp_path, out=tmp_path / "o", scale=0.03125, exclude=["torch-compile"])
    data = campaign_dict(entry, dry.fixed_scale(), dry)
    assert data["target"]["device"] == "cpu" and data["skills"] == {"exclude": ["torch-compile"]}
    spec = parse_spec(data, str(tmp_path / "c.yaml"), tmp_path)  # a valid campaign
    assert spec.target.size_scale == 0.03125 and spec.skills.exclude == ["torch-compile"]
    assert "family_posterior" not in data["agents"]  # the default stays out of the stored spec
    ablation = SuiteOptions(directory=tmp_path, out=tmp_path / "o", family_posterior=False)
    off = parse_spec(campaign_dict(entry, 1.0, ablation), str(tmp_path / "c.yaml"), tmp_path)
    assert off.agents.family_posterior is False


def test_wins_from_an_algebraic_collapse_are_marked_and_left_out_of_the_second_geomeans():
    rows = [{"key": "sum", "verified": True, "best": 100.0, "compile": 1.0, "collapse": ["graph-algebra-all"]},
            {"key": "gelu", "verified": True, "best": 1.5, "compile": 1.2, "collapse": []},
            {"key": "relu", "verified": False, "best": 1.0, "compile": 0.9, "eager": 1.0, "collapse": []},
            # an unverified row is never a collapse win, whatever its path held
            {"key": "lost", "verified": False, "best": 50.0, "compile": 1.0, "collapse": ["graph-diag-matmul"]}]
    assert [row_metrics(r)["collapse"] for r in rows] == [True, False, False, False]
    s = summary(rows)
    assert s["collapses"] == 1 and s["collapse_unknown"] == 0
    assert s["geomean_vs_best_of"] == pytest.approx((100 * 1.25 * 1 * 1) ** 0.25)
    assert s["geomean_vs_best_of_no_collapse"] == pytest.approx(1.25 ** (1 / 3))
    assert s["geomean_vs_eager_no_collapse"] == pytest.approx(1.5 ** (1 / 3))
    md = markdown(rows, s)
    assert "| collapse |" in md and "| graph-algebra-all |" in md
    assert "| reference vs speed of light |" in md and md.count("| - |\n") == 4  # no position known: '-'
    assert "without the 1 win(s) from an algebraic collapse" in md
    unknown = summary([{"key": "x", "verified": True, "best": 2.0, "compile": 1.0}])
    assert unknown["collapse_unknown"] == 1 and "not known" in markdown([{"key": "x", "verified": True, "best": 2.0,
                                                                          "compile": 1.0}], unknown)


def test_collapse_is_read_from_the_winning_path(tmp_path: Path):
    from arbor.agents.transforms import to_modelnew
    from arbor.search_tree import open_store
    from arbor.suite.collapse import collapse_moves, mark

    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    camp = store.get_or_create_campaign("c", "kernel", {})
    gemm_sum = to_modelnew(PROBLEM)
    gelu = to_modelnew(GELU)

    def add(source, parent=None, move=None, family=None):
        return store.add_node(camp.id, store.put_artifact(source, "kernel_source"), "t", parent_id=parent,
                              move_id=move, family=family).id

    root = add(gemm_sum)
    folded = add(gemm_sum + "\n# folded\n", root, "graph-algebra-all", "graph-algebra")
    compiled = add(gemm_sum + "\n# folded, compiled\n", folded, "compile-default", "torch-compile")
    groot = add(gelu)
    fused = add(gelu + "\n# fused\n", groot, "graph-algebra-all", "graph-algebra")  # activations only
    direct = add(gelu + "\n# diag\n", groot, "graph-diag-matmul", "graph-algebra")
    # a scaling between the GEMM and the sum: the collapse needs the affine fold first (l2_05)
    scaled = to_modelnew(PROBLEM.replace("return torch.sum(self.linear(x), dim=1, keepdim=True)",
                                         "y = self.linear(x) / 2\n        return torch.sum(y, dim=1, keepdim=True)"))
    assert scaled != gemm_sum
    sroot = add(scaled)
    sfolded = add(scaled + "\n# folded\n", sroot, "graph-algebra-all", "graph-algebra")
    assert collapse_moves(store, sfolded) == ["graph-algebra-all"]
    assert collapse_moves(store, compiled) == ["graph-algebra-all"]  # inherited from its parent
    assert collapse_moves(store, fused) == [] and collapse_moves(store, root) == []
    assert collapse_moves(store, direct) == ["graph-diag-matmul"]
    store.close()
    rows = mark([{"key": "a", "verified": True, "best_node": compiled}, {"key": "b", "verified": False},
                 {"key": "c", "verified": True, "best_node": fused, "collapse": ["kept"]}],
                f"sqlite:///{tmp_path / 's.db'}")
    assert [r["collapse"] for r in rows] == [["graph-algebra-all"], [], ["kept"]]


def test_the_speed_of_light_cell_says_how_far_the_reference_is_or_that_the_reading_is_a_bug():
    from arbor.suite.headroom import cell

    assert cell({"speed_of_light": {"fraction": 0.374, "bound": "memory", "note": None}}) == "37% memory"
    assert cell({"speed_of_light": {"fraction": None, "bound": "memory", "note": "BUG: 140% of ..."}}) == "bug"
    assert cell({"speed_of_light": None}) == cell({}) == "-"


DEGENERATE_WHEN_WIDE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * float(x.shape[1] <= 64)  # all zeros once the problem is scaled past 64 columns

batch_size = 16
dim = 64

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
'''


def test_a_size_at_which_the_reference_is_degenerate_is_halved_until_it_is_not(tmp_path: Path):
    """The calibrated Softmax of the development set (84k columns) came out degenerate (99.6% of
    its values within atol of one constant) and its campaign stopped at the baseline; the suite
    now halves the size, runs again and says so in the row."""
    (tmp_path / "probs").mkdir()
    (tmp_path / "probs" / "l1_90_wide_zeros.py").write_text(DEGENERATE_WHEN_WIDE)
    out = tmp_path / "out"
    res = arbor("suite", str(tmp_path / "probs"), "-o", str(out), "--budget", "1", "--scale", "4",
                "--max-cv", "2.0", timeout=900)
    assert res.returncode == 0, res.stderr
    assert "degenerate at scale 4" in res.stdout and "degenerate at scale 2" in res.stdout
    row = json.loads((out / "suite_results.json").read_text())["rows"][0]
    assert row["scale"] == 1.0 and row["degenerate_at"] == [4.0, 2.0], row
    assert "degenerate" not in (row["stop_reason"] or "") and row["campaign"].endswith("-s1")

"""Critic gates and statistics on synthetic samples (no subprocess: fast and exact)."""

import numpy as np
import pytest

from arbor.agents.critic.critic import HeuristicCritic
from arbor.agents.critic.gates import CriticConfig, Evidence
from arbor.agents.critic.guard import check_source
from arbor.agents.critic.stats import bootstrap_speedup_ci, mann_whitney_u, robust_cv, summarize

OK = [{"seed": s, "ok": True} for s in range(3)]


def samples(median, cv, n=60, seed=0):
    rng = np.random.default_rng(seed)
    return list(median * (1 + cv * rng.standard_normal(n)))


def ev(**kw):
    base = dict(is_root=False, attempt=1, purpose="primary", status="ok", error_class=None,
                error_text=None, correctness=OK)
    base.update(kw)
    return Evidence(**base)


critic = HeuristicCritic(CriticConfig(max_cv=0.1, min_speedup=1.02, confirm_new_best=False))


def test_bootstrap_ci_brackets_true_ratio():
    b, c = samples(10.0, 0.02), samples(5.0, 0.02, seed=1)
    point, lo, hi = bootstrap_speedup_ci(b, c, 2000)
    assert lo < point < hi and lo > 1.9 and hi < 2.1


def test_mann_whitney_detects_shift_and_not_noise():
    assert mann_whitney_u(samples(10, 0.02), samples(9, 0.02, seed=3))[1] < 1e-6
    assert mann_whitney_u(samples(10, 0.02), samples(10, 0.02, seed=3))[1] > 0.01


def test_robust_cv_ignores_few_outliers():
    x = samples(1.0, 0.01)
    x[:3] = [50.0, 60.0, 70.0]
    assert robust_cv(x) < 0.03


def test_accept_real_speedup():
    j = critic.judge(ev(), samples(10, 0.02), samples(5, 0.02, seed=1))
    assert (j.decision, j.diagnosis, j.final_state) == ("accept", "improved", "accepted")
    assert j.value == pytest.approx(np.log(j.speedup))
    assert [g["gate"] for g in j.gates] == ["guard", "ran", "correct", "plausible", "stable", "env",
                                          "reference", "significant", "confirm_best"]


def test_no_gain_when_ci_includes_one():
    j = critic.judge(ev(), samples(10, 0.02), samples(10, 0.02, seed=1))
    assert (j.decision, j.diagnosis) == ("reject", "no_gain")


def test_regression_against_parent():
    j = critic.judge(ev(parent_speedup=2.0), samples(10, 0.02), samples(8, 0.02, seed=1))
    assert (j.decision, j.diagnosis) == ("reject", "regression")


def test_noise_floor_raises_the_bar():
    b, c = samples(10, 0.01), samples(9.5, 0.01, seed=1)
    assert critic.judge(ev(), b, c).decision == "accept"
    assert critic.judge(ev(noise_floor=0.08), b, c).diagnosis == "no_gain"


def test_unstable_remeasure_then_reject():
    b, c = samples(10, 0.5), samples(5, 0.5, seed=1)
    j1 = critic.judge(ev(), b, c)
    assert (j1.decision, j1.diagnosis, j1.remeasure_purpose, j1.final_state) == ("remeasure", "unstable", "remeasure", None)
    j2 = critic.judge(ev(remeasures_done=1), b, c)
    assert (j2.decision, j2.diagnosis) == ("reject", "unstable")


def test_load_that_slows_whole_rounds_is_not_instability():
    """A shared machine slows rounds, not sides: absolute CV 20%+, paired ratios within 2%."""
    rng = np.random.default_rng(3)
    load = 1 + np.abs(rng.standard_normal(60)) * 0.8  # per-round slowdown, both sides alike
    b = list(10 * load * (1 + 0.01 * rng.standard_normal(60)))
    c = list(5 * load * (1 + 0.01 * rng.standard_normal(60)))
    j = critic.judge(ev(), b, c)
    assert j.stats["baseline_cv"] > 0.2 and j.stats["ratio_cv"] < 0.05
    assert (j.decision, j.diagnosis) == ("accept", "improved"), j.reason
    root = critic.judge(ev(is_root=True), b, list(10 * load * (1 + 0.01 * rng.standard_normal(60))))
    assert root.diagnosis == "baseline", root.reason


def test_a_minority_of_preempted_samples_is_not_instability():
    """Seen at load 5 on 2 cores: 40% of the samples preempted (3-4.5x slower) on either side
    at random. Ratios scatter (robust CV above max_cv), but the medians and the A/A speedup
    are pinned."""
    rng = np.random.default_rng(5)
    modes = [145e-6, 145e-6, 145e-6, 420e-6, 650e-6]
    side = lambda: list(rng.choice(modes, 200) * (1 + 0.02 * rng.standard_normal(200)))  # noqa: E731
    root = critic.judge(ev(is_root=True), side(), side())
    assert root.stats["ratio_cv"] > critic.config.max_cv and root.diagnosis == "baseline", root.reason


def test_incorrect_and_failures():
    bad = [{"seed": 0, "ok": True}, {"seed": 1, "ok": False}, {"seed": 2, "ok": True}]
    assert critic.judge(ev(correctness=bad), [1.0] * 20, [1.0] * 20).diagnosis == "incorrect"
    assert critic.judge(ev(correctness=OK[:2]), [1.0] * 20, [1.0] * 20).diagnosis == "incorrect"
    j = critic.judge(ev(status="error", error_class="timeout", error_text="killed after 10 s"), [], [])
    assert (j.decision, j.diagnosis, j.final_state) == ("fail", "timeout", "failed")
    j = critic.judge(ev(status="error", error_class="incorrect", error_text="max abs err 3"), [], [])
    assert (j.decision, j.final_state) == ("reject", "rejected")


def test_new_best_needs_confirmation_and_keeps_lower():
    c2 = HeuristicCritic(CriticConfig(max_cv=0.1))
    b, c = samples(10, 0.02), samples(5, 0.02, seed=1)
    j = c2.judge(ev(best_speedup=1.5), b, c)
    assert (j.decision, j.diagnosis, j.remeasure_purpose) == ("remeasure", "confirm", "confirm")
    j2 = c2.judge(ev(best_speedup=1.5, purpose="confirm", previous_speedup=1.9), b, c)
    assert j2.decision == "accept" and j2.speedup == pytest.approx(1.9)
    # not a new best: no confirmation needed
    assert c2.judge(ev(best_speedup=3.0), b, c).decision == "accept"


def test_a_confirmation_that_contradicts_the_first_run_gets_a_tie_break_and_the_median():
    c2 = HeuristicCritic(CriticConfig(max_cv=0.1))
    b, c = samples(10, 0.02), samples(5, 0.02, seed=1)  # this run says 2.0x
    # first run said 2.6x (above the best 2.3x), the confirmation says 2.0x: a third run decides
    j = c2.judge(ev(best_speedup=2.3, purpose="confirm", previous_speedup=2.6), b, c)
    assert (j.decision, j.diagnosis, j.remeasure_purpose) == ("remeasure", "tiebreak", "tiebreak")
    j = c2.judge(ev(best_speedup=2.3, purpose="tiebreak", previous_speedup=2.6, earlier_speedups=[2.6, 1.9]), b, c)
    assert j.decision == "accept" and j.speedup == pytest.approx(2.0, rel=0.02)  # median of 2.6, 1.9, ~2.0
    assert "tie-break" in j.reason
    # a confirmation that agrees with the first run needs no third
    j = c2.judge(ev(best_speedup=1.5, purpose="confirm", previous_speedup=2.2), b, c)
    assert j.decision == "accept" and j.speedup == pytest.approx(2.0, rel=0.02)  # the lower, as before


def test_root_is_baseline_with_noise_floor():
    j = critic.judge(ev(is_root=True), samples(10, 0.02), samples(10, 0.02, seed=1))
    assert (j.decision, j.diagnosis, j.value) == ("accept", "baseline", 0.0)
    assert 0 < j.noise_floor < 0.05


def test_summarize_fields():
    st = summarize(samples(10, 0.02), samples(5, 0.02, seed=1))
    assert st.rounds == 60 and st.baseline_median_s == pytest.approx(10, rel=0.02)


@pytest.mark.parametrize("src, reason", [
    ("class ModelNew(Model):\n    pass\n", "inherits the reference"),
    ("import subprocess\nclass ModelNew:\n    pass\n", "imports subprocess"),
    ("import torch\ntorch.cuda.synchronize = lambda: None\nclass ModelNew:\n    pass\n", "monkey-patching"),
    ("class ModelNew:\n    def forward(self, x):\n        return Model()(x)\n", "instantiates the reference"),
    ("class ModelNew:\n    def forward(self, x):\n        return eval('x')\n", "calls eval"),
    ("class ModelNew:\n    def forward(self, x):\n        return open('/etc/passwd').read()\n", "calls open"),
    ("import time\ntime.perf_counter = lambda: 0\nclass ModelNew:\n    pass\n", "time.perf_counter"),
])
def test_guard_flags_hacks(src, reason):
    findings = check_source(src)
    assert findings and findings[0].code == "hack_suspected"
    assert any(reason in f.reason for f in findings)


def test_guard_passes_honest_and_catches_syntax():
    honest = "import torch\nimport torch.nn.functional as F\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return F.gelu(x)\n"
    assert check_source(honest) == []
    assert check_source("class ModelNew(:\n")[0].code == "compile_error"
    assert check_source("x = 1\n")[0].code == "compile_error"


# ---- integrity gates on synthetic evidence ---------------------------------------------------
FP = {"host": "h1", "device": "cpu", "device_name": "EPYC", "cpu_model": "EPYC", "num_threads": 1,
      "torch": "2.13"}
PEAK = {"flops_per_s": 1e11, "bytes_per_s": 1e11, "source": "measured"}


def test_mann_whitney_second_opinion_can_veto():
    strict = HeuristicCritic(CriticConfig(max_cv=0.5, mw_alpha=1e-9, confirm_new_best=False))
    b, c = samples(10, 0.05), samples(9.6, 0.05, seed=1)  # CI [1.027, ...] clears 1 + noise, p ~ 1e-7
    j = strict.judge(ev(), b, c)
    assert (j.diagnosis, j.gates[-1]["gate"]) == ("no_gain", "significant") and "Mann-Whitney" in j.reason


def test_minimum_effect_size():
    big = HeuristicCritic(CriticConfig(max_cv=0.1, min_speedup=1.5, confirm_new_best=False))
    j = big.judge(ev(), samples(10, 0.01), samples(8, 0.01, seed=1))  # a clear but small 1.25x
    assert j.diagnosis == "no_gain" and "minimum effect size" in j.reason


def test_env_drift_identity_rejects_and_throttling_remeasures():
    base = dict(FP)
    j = critic.judge(ev(fingerprint={**FP, "host": "h2"}, baseline_fingerprint=base),
                     samples(10, 0.02), samples(5, 0.02, seed=1))
    assert (j.decision, j.diagnosis) == ("reject", "env_drift") and "host" in j.reason
    assert critic.judge(ev(fingerprint={**FP, "num_threads": 2}, baseline_fingerprint=base),
                        samples(10, 0.02), samples(5, 0.02, seed=1)).diagnosis == "env_drift"
    # a baseline timed with glibc's default allocator vs a candidate timed pinned (sandbox/harness/allocator.py)
    j = critic.judge(ev(fingerprint={**FP, "host_allocator": "glibc:no-mmap,no-trim"},
                        baseline_fingerprint={**base, "host_allocator": "not pinned"}),
                     samples(10, 0.02), samples(5, 0.02, seed=1))
    assert j.diagnosis == "env_drift" and "host_allocator" in j.reason
    hot = {**FP, "gpu_state_end": {"throttle_reasons": 0x20}}
    j = critic.judge(ev(fingerprint=hot, baseline_fingerprint=base), samples(10, 0.02), samples(5, 0.02, seed=1))
    assert (j.decision, j.diagnosis, j.remeasure_purpose) == ("remeasure", "env_drift", "remeasure")
    assert "SwThermal" in j.reason
    j = critic.judge(ev(fingerprint={**FP, "gpu_throttle_reasons": 0x4}, baseline_fingerprint=base,
                        remeasures_done=1), samples(10, 0.02), samples(5, 0.02, seed=1))
    assert (j.decision, j.diagnosis) == ("reject", "env_drift") and "SwPowerCap" in j.reason
    idle = {**FP, "gpu_throttle_reasons": 0x1}  # GpuIdle is not a slowdown
    assert critic.judge(ev(fingerprint=idle, baseline_fingerprint=base),
                        samples(10, 0.02), samples(5, 0.02, seed=1)).decision == "accept"


def test_locked_clock_drift_is_env_drift():
    lock = {**FP, "clocks_locked": True}
    a = {**lock, "gpu_state_end": {"sm_clock_mhz": 1980}}
    b = {**lock, "gpu_state_end": {"sm_clock_mhz": 1410}}
    j = critic.judge(ev(fingerprint=a, baseline_fingerprint=b), samples(10, 0.02), samples(5, 0.02, seed=1))
    assert j.diagnosis == "env_drift" and "1980" in j.reason
    unlocked = {**FP, "gpu_state_end": {"sm_clock_mhz": 1980}}
    assert critic.judge(ev(fingerprint=unlocked, baseline_fingerprint={**FP, "gpu_state_end": {"sm_clock_mhz": 1410}}),
                        samples(10, 0.02), samples(5, 0.02, seed=1)).decision == "accept"


def test_speed_of_light_floor():
    facts = {"cost": {"bytes": 10_000_000, "flops": 0, "dtype": "float32"}, "peak": PEAK}
    # 10 MB at 100 GB/s = 100 us; slack 2 flags below 50 us
    fast = critic.judge(ev(fingerprint=FP, facts=facts), samples(1e-3, 0.02), samples(20e-6, 0.02, seed=1))
    assert (fast.diagnosis, [g["gate"] for g in fast.gates if not g["passed"]]) == ("hack_suspected", ["plausible"])
    assert "faster than the hardware allows" in fast.reason
    ok = critic.judge(ev(fingerprint=FP, facts=facts), samples(1e-3, 0.02), samples(200e-6, 0.02, seed=1))
    assert ok.decision == "accept"
    assert any("of speed of light" in g["reason"] for g in ok.gates if g["gate"] == "plausible")
    # the baseline itself below the floor: the peak is wrong for this machine, so no verdict from it
    assert critic.judge(ev(fingerprint=FP, facts=facts), samples(30e-6, 0.02),
                        samples(10e-6, 0.02, seed=1)).decision == "accept"
    # plausibility comes before stability: an impossible result is not re-measured as "unstable"
    noisy = critic.judge(ev(fingerprint=FP, facts=facts), samples(1e-3, 0.5), samples(20e-6, 0.5, seed=1))
    assert noisy.diagnosis == "hack_suspected"


def test_flop_floor_only_when_asked():
    facts = {"cost": {"bytes": 1000, "flops": 10**9, "dtype": "float32"}, "peak": PEAK}  # 10 ms of FLOPs
    b, c = samples(50e-3, 0.02), samples(1e-3, 0.02, seed=1)
    assert critic.judge(ev(fingerprint=FP, facts=facts), b, c).decision == "accept"  # algebra may cut FLOPs
    flops = HeuristicCritic(CriticConfig(max_cv=0.1, plausibility_flops=True, confirm_new_best=False))
    assert flops.judge(ev(fingerprint=FP, facts=facts), b, c).diagnosis == "hack_suspected"


def test_gpu_floor_from_the_device_table():
    fp = {**FP, "device": "cuda", "gpu_name": "NVIDIA H100 80GB HBM3"}
    facts = {"cost": {"bytes": 3_900_000_000, "flops": 0, "dtype": "float16"}}  # 1 ms at 3.9 TB/s
    j = critic.judge(ev(fingerprint=fp, facts=facts), samples(5e-3, 0.02), samples(0.2e-3, 0.02, seed=1))
    assert j.diagnosis == "hack_suspected" and "table:H100" in j.reason
    unknown = {**fp, "gpu_name": "Some Future GPU"}
    assert critic.judge(ev(fingerprint=unknown, facts=facts), samples(5e-3, 0.02),
                        samples(0.2e-3, 0.02, seed=1)).decision == "accept"


def test_timer_cross_checks():
    b, c = samples(1e-3, 0.02), samples(0.5e-3, 0.02, seed=1)
    lying = {"timed_s": 9.0, "job_wall_s": 3.0, "timing_wall_s": 9.5}
    j = critic.judge(ev(fingerprint=FP, facts=lying), b, c)
    assert j.diagnosis == "hack_suspected" and "parent's clock" in j.reason
    escaping = {"timed_s": 0.1, "job_wall_s": 3.0, "timing_wall_s": 1.0}
    j = critic.judge(ev(fingerprint=FP, facts=escaping), b, c)
    assert j.diagnosis == "hack_suspected" and "10%" in j.reason
    cuda = critic.judge(ev(fingerprint={**FP, "device": "cuda"}, facts=escaping), b, c)
    assert cuda.decision == "accept"  # on GPU the L2 flush legitimately sits outside the events


def test_harness_findings_route_to_their_gates():
    j = critic.judge(ev(status="error", error_class="hack_suspected", correctness=OK[:1],
                        error_text="the candidate modified input 0 in place"), [], [])
    assert (j.decision, j.diagnosis) == ("reject", "hack_suspected")
    assert [g["gate"] for g in j.gates if not g["passed"]] == ["plausible"] and "input 0" in j.reason
    j = critic.judge(ev(status="error", error_class="harness_error",
                        error_text="degenerate problem: for seed 0 the reference output 0 is all zeros"), [], [])
    assert (j.decision, j.diagnosis) == ("fail", "harness_error") and j.reason.startswith("degenerate problem")


def test_aa_split_noise_is_a_bias_not_a_spread():
    from arbor.agents.critic.stats import aa_split_noise

    flat = samples(1.0, 0.05, n=200)
    assert aa_split_noise(flat) < 0.03
    assert aa_split_noise(samples(1.0, 0.4, n=20)) == 0.0  # scatter alone demonstrates no bias
    biased = [x * (1.1 if i % 2 == 0 else 1.0) for i, x in enumerate(flat)]  # first-in-round 10% slower
    assert 0.05 < aa_split_noise(biased) < 0.1
    j = critic.judge(ev(), biased, samples(1.0, 0.05, n=200, seed=1))  # a ~1.05x "win" made of the bias
    assert j.diagnosis == "no_gain"


@pytest.mark.parametrize("src, reason", [
    ("import _thread\nclass ModelNew:\n    pass\n", "imports _thread"),
    ("import os\nclass ModelNew:\n    def __init__(self):\n        os.posix_spawn('x', [], {})\n", "posix_spawn"),
    ("import sys\nM = sys.modules['arbor_problem'].Model\nclass ModelNew:\n    pass\n", "sys.modules"),
    ("import torch\ntorch.__dict__['allclose'] = 1\nclass ModelNew:\n    pass\n", "__dict__"),
    ("import torch\nclass ModelNew:\n    def __init__(self):\n        torch.set_float32_matmul_precision('medium')\n",
     "lowers precision"),
    ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\nclass ModelNew:\n    pass\n", "allow_tf32"),
    ("import torch\nlib = torch.library.Library('aten', 'IMPL')\nclass ModelNew:\n    pass\n", "aten"),
    ("from torch.utils._python_dispatch import TorchDispatchMode\nclass ModelNew:\n    pass\n", "intercepts"),
    ("import sys\nsys.setprofile(None)\nclass ModelNew:\n    pass\n", "sys.setprofile"),
    ("from pathlib import Path\nclass ModelNew:\n    def f(self):\n        return Path('/x').read_bytes()\n",
     "read_bytes"),
    ("import torch.nn.functional as fn\nfn.gelu = None\nclass ModelNew:\n    pass\n", "fn.gelu"),
    ("from arbor_harness_checks import compare\nclass ModelNew:\n    pass\n", "reaching the harness"),
    ("import torch\nclass T(torch.Tensor):\n    def __torch_function__(cls, *a):\n        return True\n"
     "class ModelNew:\n    pass\n", "__torch_function__"),
])
def test_guard_flags_more_hacks(src, reason):
    findings = check_source(src)
    assert findings and all(f.code == "hack_suspected" for f in findings)
    assert any(reason in f.reason for f in findings), [f.reason for f in findings]


@pytest.mark.parametrize("stmt, flagged_in", [
    ("torch.backends.cuda.matmul.allow_tf32 = True", {"fp32"}),
    ("torch.backends.cuda.matmul.allow_tf32 = False", set()),  # toward more precision: always allowed
    ("torch.backends.cudnn.allow_tf32 = flag", {"fp32"}),  # an unreadable value: the lowest it allows
    ("torch.set_float32_matmul_precision('high')", {"fp32"}),
    ("torch.set_float32_matmul_precision('medium')", {"fp32", "fp16"}),  # bf16 is below fp16
    ("torch.backends.cuda.matmul.fp32_precision = 'tf32'", {"fp32"}),
    ("torch.backends.cuda.matmul.allow_fp16_accumulation = True", {"fp32"}),
    ("torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True", {"fp32", "fp16"}),
    ("torch._C._set_cublas_allow_tf32(True)", {"fp32"}),
    ("torch._C._set_fp32_precision_setter('cuda', 'matmul', 'bf16')", {"fp32", "fp16"}),
    ("ctx = torch.backends.cudnn.flags(enabled=True, allow_tf32=True)", {"fp32"}),
    ("torch.backends.cudnn.benchmark = True", set()),  # the candidate's own, in every mode
    ("torch.set_default_dtype(torch.float16)", {"fp32", "fp16", "bf16"}),
])
def test_guard_judges_precision_switches_by_the_campaigns_mode(stmt, flagged_in):
    src = f"import torch\nclass ModelNew:\n    def forward(self, x, flag=True):\n        {stmt}\n        return x\n"
    for mode in ("fp32", "fp16", "bf16"):
        findings = check_source(src, precision=mode)
        assert bool(findings) == (mode in flagged_in), (stmt, mode, findings)
        assert all(f.code == "hack_suspected" for f in findings)


def test_guard_passes_ordinary_kernel_code():
    honest = (
        "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        torch.set_num_threads(2)\n"
        "        self.register_buffer('w', torch.ones(4))\n        self.cache = {}\n"
        "        self._compiled_forward = torch.compile(self._forward_eager)\n"
        "    def _forward_eager(self, x):\n        y = torch.empty_like(x)\n        y[0] = 1\n"
        "        for m in self.modules():\n            pass\n        return F.gelu(x) * self.w.sum()\n"
        "    @torch.inference_mode()\n    def forward(self, x):\n        return self._compiled_forward(x)\n")
    assert check_source(honest) == []


@pytest.mark.parametrize("ref, cand, baseline_ref, why, tolerated", [
    # the reference at 10 here, 5 in the baseline's measurement: the 2x speedup is inflated;
    # within the tolerance (9) the paired speedup stands
    (10, 5, 5.0, "slowed", 9.0),
    # the reference at 5 here, 10 in the baseline's: this run timed something else (seen: reference
    # 36 -> 19 ms, a compiled candidate 18 -> 2.5 ms, a 2.1x kernel read 7.3x); somewhat faster
    # (5.5: a quieter machine, within the tolerance) is not drift
    (5, 0.7, 10.0, "not comparable", 5.5),
])
def test_a_reference_far_from_the_baselines_either_way_is_env_drift_not_a_speedup(ref, cand, baseline_ref, why,
                                                                                   tolerated):
    b, c = samples(ref, 0.02), samples(cand, 0.02, seed=1)
    j = critic.judge(ev(baseline_reference_s=baseline_ref), b, c)
    assert (j.decision, j.diagnosis) == ("remeasure", "env_drift") and why in j.reason
    j = critic.judge(ev(baseline_reference_s=baseline_ref, remeasures_done=1), b, c)
    assert (j.decision, j.diagnosis, j.final_state) == ("reject", "env_drift", "rejected")
    assert critic.judge(ev(baseline_reference_s=tolerated), b, c).decision == "accept"


def test_a_reference_slowed_only_beside_the_candidate_is_hack_suspected_with_the_factor():
    """Issue 27: the reference at 10 here, 5 in the baseline's measurement. First verdict: measure
    the baseline alone, then the candidate again (``reprobe``). If that probe is fast (5), the
    slowdown may live in the candidate's process: once is asked again (the probe and the
    measurement are two moments of a machine whose load moves: seen x1.26 for an honest twin on a
    loaded CI box), and a slowdown seen twice is ``hack_suspected`` naming both factors, not
    ``env_drift``. If the probe is slow too (the machine slowed for everyone), the paired ratio
    is judged as usual."""
    b, c = samples(10, 0.02), samples(5, 0.02, seed=1)
    first = critic.judge(ev(baseline_reference_s=5.0), b, c)
    assert (first.decision, first.diagnosis) == ("remeasure", "env_drift")
    assert [g.get("reprobe") for g in first.gates if g.get("passed") is False] == [True]
    seen = critic.judge(ev(baseline_reference_s=5.0, reference_probe_s=5.0, remeasures_done=1, attempt=2,
                           purpose="remeasure"), b, c)
    assert (seen.decision, seen.diagnosis) == ("remeasure", "hack_suspected"), seen.reason
    asked = [g for g in seen.gates if g.get("passed") is False]
    assert len(asked) == 1 and asked[0].get("reprobe") and asked[0]["tax"] == pytest.approx(2.0, rel=0.01)
    j = critic.judge(ev(baseline_reference_s=5.0, reference_probe_s=5.0, remeasures_done=1, attempt=3,
                        purpose="remeasure", earlier_taxes=[2.0]), b, c)
    assert (j.decision, j.diagnosis) == ("reject", "hack_suspected")
    assert "reference slowed inside the candidate's process (x2.00)" in j.reason and "(x2.00)" in j.reason
    # the second look finds the reference as fast beside the candidate as alone: the first was
    # the machine's, and the candidate is judged on its paired ratio
    b2 = samples(5.1, 0.02)
    ok = critic.judge(ev(baseline_reference_s=5.0, reference_probe_s=5.0, remeasures_done=1, attempt=3,
                         purpose="remeasure", earlier_taxes=[1.26]), b2, samples(2.5, 0.02, seed=1))
    assert (ok.decision, ok.diagnosis) == ("accept", "improved"), ok.reason
    machine = critic.judge(ev(baseline_reference_s=9.8, reference_probe_s=9.8, remeasures_done=1, attempt=2,
                              purpose="remeasure"), b, c)
    assert (machine.decision, machine.diagnosis) == ("accept", "improved")


def test_a_speedup_that_clears_the_bar_without_its_references_slowdown_is_judged_at_that_figure():
    """Seen twice, a reference slower beside the candidate than alone (6 vs 5, x1.2) is judged out:
    the remaining gates see the reference's samples divided by the factor, so a real 2x that read
    2.4x is accepted at 2x (the factor kept in the stats), and a confirmation is asked at 2x, not
    at the inflated figure. A tax gains the candidate nothing either way."""
    b, c = samples(6.0, 0.02), samples(2.5, 0.02, seed=1)
    e = dict(baseline_reference_s=5.0, reference_probe_s=5.0, remeasures_done=1, attempt=3,
             purpose="remeasure", earlier_taxes=[1.3])
    j = critic.judge(ev(**e), b, c)
    assert (j.decision, j.diagnosis) == ("accept", "improved"), j.reason
    assert j.speedup == pytest.approx(2.0, rel=0.03) and j.stats["reference_tax"] == pytest.approx(1.2, rel=0.02)
    assert "as it runs alone (2.4" in j.reason
    assert [g["gate"] for g in j.gates if g.get("tax")] == ["reference"]
    confirm = HeuristicCritic(CriticConfig(max_cv=0.1, confirm_new_best=True)).judge(ev(**e, best_speedup=1.5), b, c)
    assert (confirm.decision, confirm.diagnosis) == ("remeasure", "confirm") and confirm.speedup == pytest.approx(2.0, rel=0.03)


def test_a_spread_reference_tax_is_not_blamed_on_the_machine():
    """A tax that varies scatters the paired ratios (``unstable``); when the reference also ran
    slow, the re-measurement is preceded by a probe, and a fast probe turns ``unstable`` into
    ``hack_suspected``. Without a slow reference ``unstable`` stays ``unstable``."""
    rng = np.random.default_rng(5)
    b = list(10 * (1 + 0.6 * rng.random(60)))  # a tax of 0-60% per sample
    c = samples(5, 0.02, seed=1)
    first = critic.judge(ev(baseline_reference_s=5.0), b, c)
    assert (first.decision, first.diagnosis) == ("remeasure", "unstable"), first.reason
    assert "slowed it" in first.reason and any(g.get("reprobe") for g in first.gates)
    again = critic.judge(ev(baseline_reference_s=5.0, reference_probe_s=5.0, remeasures_done=1, attempt=2,
                            purpose="remeasure"), b, c)
    assert (again.decision, again.diagnosis) == ("remeasure", "hack_suspected"), again.reason
    j = critic.judge(ev(baseline_reference_s=5.0, reference_probe_s=5.0, remeasures_done=1, attempt=3,
                        purpose="remeasure", earlier_taxes=[1.6]), b, c)
    assert (j.decision, j.diagnosis) == ("reject", "hack_suspected") and "inside the candidate's process" in j.reason
    noisy = critic.judge(ev(baseline_reference_s=12.0), b, c)
    assert noisy.diagnosis == "unstable" and not any(g.get("reprobe") for g in noisy.gates)


def test_reference_drift_tolerance_follows_the_baselines_noise_floor():
    """+25%: a drift where the A/A pinned 1% (tolerance 15%), noise where it pinned 3% (30%);
    never more than the configured cap (50%)."""
    b, c = samples(10, 0.02), samples(5, 0.02, seed=1)
    assert critic.judge(ev(baseline_reference_s=8.0, noise_floor=0.01), b, c).diagnosis == "env_drift"
    assert critic.judge(ev(baseline_reference_s=8.0, noise_floor=0.03), b, c).decision == "accept"
    assert critic.judge(ev(baseline_reference_s=6.0, noise_floor=0.2), b, c).diagnosis == "env_drift"


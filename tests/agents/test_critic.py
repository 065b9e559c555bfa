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
    assert [g["gate"] for g in j.gates] == ["guard", "ran", "correct", "stable", "significant", "confirm_best"]


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

"""The serving Critic on synthetic measurements: every gate, in order, with its diagnosis."""

import math

import pytest

from arbor.agents.critic.gates import CriticConfig, Evidence
from arbor.agents.critic.serving_gates import ServingCriticConfig, accuracy_report, judge_serving, score

SCFG = ServingCriticConfig(e2e_ms=500, percentile=99, max_logprob_diff=0.1, min_prefix_match=0.9)
CFG = CriticConfig(max_cv=0.15, min_speedup=1.02, max_remeasures=1)


def level(c, req_s, e2e, failed=0):
    dist = {"n": 16, "mean": e2e * 0.8, "p50": e2e * 0.7, "p90": e2e * 0.9, "p95": e2e * 0.95, "p99": e2e}
    return {"level": {"label": f"c={c}", "concurrency": c}, "req_s": req_s, "out_tok_s": 8 * req_s,
            "goodput_req_s": req_s, "completed": 16 - failed, "failed": failed, "slo_attainment": 1.0,
            "ttft_ms": dict(dist), "tpot_ms": dict(dist), "itl_ms": dict(dist), "e2e_ms": dict(dist), "server": {}}


def side(scale, lat=1.0, failed=0):
    # two levels: c=2 meets the 500 ms SLO; c=8 misses it unless latencies shrink
    return [level(2, 8 * scale, 300 * lat), level(8, 10 * scale, 900 * lat, failed)]


def raw(base_scales, cand_scales, cand_lat=1.0, cand_failed=0, base_failed=0, accuracy=None):
    return {"rounds": [{"baseline": side(b, failed=base_failed), "candidate": side(c, cand_lat, cand_failed)}
                       for b, c in zip(base_scales, cand_scales)], "accuracy": accuracy}


def ev(**kw):
    base = dict(is_root=False, attempt=1, purpose="primary", status="ok", error_class=None, error_text=None,
                correctness=[], parent_speedup=1.0, best_speedup=5.0, noise_floor=0.03)
    base.update(kw)
    return Evidence(**base)


def test_a_faster_config_is_accepted_with_both_fronts():
    j = judge_serving(ev(), raw([1.0, 0.8, 1.2], [2.0, 1.6, 2.4], cand_lat=0.5), CFG, SCFG)
    assert (j.decision, j.diagnosis, j.final_state) == ("accept", "improved", "accepted")
    assert j.speedup == pytest.approx(j.stats["ratio"]) and j.value == pytest.approx(math.log(j.speedup))
    assert j.speedup > 2.0  # double throughput *and* c=8 now meets the SLO
    assert j.stats["pareto_improvement_pct"] > 100 and j.stats["front_baseline"] and j.stats["front_candidate"]
    assert [g["gate"] for g in j.gates] == ["guard", "ran", "requests", "accuracy", "stable", "significant",
                                           "confirm_best"]


def test_drift_shared_by_both_sides_cancels_in_the_paired_ratio():
    sc = score(raw([1.0, 0.4, 1.6], [1.1, 0.44, 1.76]), SCFG)
    assert sc.cv_baseline > 0.5 and sc.cv_ratio < 0.01 and sc.ratio == pytest.approx(1.1, rel=1e-6)


def test_no_gain_and_regression():
    j = judge_serving(ev(), raw([1.0, 1.0, 1.0], [1.01, 0.99, 1.0]), CFG, SCFG)
    assert (j.decision, j.diagnosis) == ("reject", "no_gain")
    j = judge_serving(ev(parent_speedup=2.0), raw([1.0, 1.0, 1.0], [1.2, 1.21, 1.19]), CFG, SCFG)
    assert (j.decision, j.diagnosis) == ("reject", "regression")


def test_unstable_comparison_is_remeasured_then_rejected():
    r = raw([1.0, 1.0, 1.0], [1.0, 2.0, 3.5])
    j = judge_serving(ev(), r, CFG, SCFG)
    assert (j.decision, j.diagnosis, j.remeasure_purpose) == ("remeasure", "unstable", "remeasure")
    j = judge_serving(ev(remeasures_done=1), r, CFG, SCFG)
    assert (j.decision, j.diagnosis) == ("reject", "unstable")


def test_failed_requests_are_never_accepted():
    j = judge_serving(ev(), raw([1, 1, 1], [3, 3, 3], cand_failed=2), CFG, SCFG)
    assert (j.decision, j.diagnosis) == ("fail", "runtime_error") and "6 request(s) failed" in j.reason
    j = judge_serving(ev(), raw([1, 1, 1], [3, 3, 3], base_failed=1), CFG, SCFG)
    assert (j.decision, j.diagnosis) == ("remeasure", "unstable")


def probe(tokens, shift=0.0):
    return [{"ok": True, "tokens": t, "logprobs": [-0.5 + shift] * len(t)} for t in tokens]


def test_accuracy_regression_rejects_however_fast():
    base = probe([["a", "b", "c", "d"]] * 4)
    drift = probe([["a", "x", "y", "z"]] * 4)
    j = judge_serving(ev(), raw([1, 1, 1], [3, 3, 3], accuracy={"baseline": base, "candidate": drift}), CFG, SCFG)
    assert (j.decision, j.diagnosis) == ("reject", "accuracy_regression") and "25%" in j.reason
    shifted = probe([["a", "b", "c", "d"]] * 4, shift=0.3)
    j = judge_serving(ev(), raw([1, 1, 1], [3, 3, 3], accuracy={"baseline": base, "candidate": shifted}), CFG, SCFG)
    assert j.diagnosis == "accuracy_regression" and "0.300" in j.reason
    close = probe([["a", "b", "c", "d"]] * 4, shift=0.01)
    j = judge_serving(ev(), raw([1, 1, 1], [3, 3, 3], accuracy={"baseline": base, "candidate": close}), CFG, SCFG)
    assert j.decision == "accept" and j.stats["accuracy"]["prefix_match"] == 1.0
    assert accuracy_report({"baseline": base}) is None


def test_an_accuracy_rejection_names_the_knob_that_changed_the_outputs():
    base = probe([["a", "b", "c", "d"]] * 4)
    acc = {"baseline": base, "candidate": probe([["a", "x", "y", "z"]] * 4), "knobs": {"cache_type_k": "q4_0"}}
    j = judge_serving(ev(), raw([1, 1, 1], [3, 3, 3], accuracy=acc), CFG, SCFG)
    assert (j.decision, j.diagnosis) == ("reject", "accuracy_regression")
    assert j.reason.startswith("cache_type_k=q4_0 changes the outputs: ")


@pytest.mark.parametrize("cls", ["oom", "startup_failed", "timeout", "runtime_error"])
def test_server_failures_keep_their_diagnosis(cls):
    j = judge_serving(ev(status="failed", error_class=cls, error_text="candidate server exited\nlog..."),
                      None, CFG, SCFG)
    assert (j.decision, j.diagnosis, j.final_state) == ("fail", cls, "failed")


def test_baseline_a_a_sets_the_noise_floor_and_a_new_best_is_confirmed():
    j = judge_serving(ev(is_root=True), raw([1.0, 1.0, 1.0], [1.05, 0.97, 1.0]), CFG, SCFG)
    assert (j.decision, j.diagnosis, j.speedup, j.value) == ("accept", "baseline", 1.0, 0.0)
    assert 0 < j.noise_floor < 0.1
    r = raw([1.0, 1.0, 1.0], [2.0, 2.1, 1.9], cand_lat=0.5)
    j = judge_serving(ev(best_speedup=1.0), r, CFG, SCFG)
    assert (j.decision, j.diagnosis, j.remeasure_purpose) == ("remeasure", "confirm", "confirm")
    j = judge_serving(ev(best_speedup=1.0, purpose="confirm", previous_speedup=2.1), r, CFG, SCFG)
    assert j.decision == "accept" and j.speedup == pytest.approx(min(2.1, j.stats["ratio"]))


def test_hypervolume_objective_when_asked():
    h = ServingCriticConfig(e2e_ms=500, metric="hypervolume")
    sc = score(raw([1, 1, 1], [2, 2, 2]), h)
    assert sc.metric == "hypervolume" and sc.ratio == pytest.approx(sc.hv_candidate / sc.hv_baseline)


def test_a_node_is_confirmed_once_even_after_a_noisy_confirmation():
    r = raw([1.0, 1.0, 1.0], [2.0, 2.1, 1.9], cand_lat=0.5)
    # attempt 3 after one confirmation (attempt 2) that was unstable and re-measured
    j = judge_serving(ev(best_speedup=1.0, attempt=3, purpose="remeasure", remeasures_done=1), r, CFG, SCFG)
    assert (j.decision, j.diagnosis) == ("accept", "improved")


def test_faster_than_the_baseline_but_slower_than_its_parent_is_never_improved():
    data = raw([1.0, 0.8, 1.2], [2.0, 1.6, 2.4], cand_lat=0.5)
    plain = judge_serving(ev(), data, CFG, SCFG)
    # a parent a little faster, within the noise margin: accepted, but not as an improvement
    j = judge_serving(ev(parent_speedup=plain.speedup * 1.01), data, CFG, SCFG)
    assert (j.decision, j.diagnosis) == ("accept", "below_parent")
    assert j.reason.startswith("slower than its parent")


def test_levels_carry_the_columns_of_vllm_bench_serve():
    sc = score(raw([1.0, 1.0, 1.0], [2.0, 2.0, 2.0], cand_lat=0.5), SCFG)
    lv = sc.to_dict()["levels_candidate"][0]
    for m in ("ttft", "tpot", "itl", "e2e"):
        for st in ("mean", "p50", "p99"):
            assert lv[f"{m}_{st}_ms"] is not None, (m, st)
    assert lv["ttft_p50_ms"] == pytest.approx(300 * 0.5 * 0.7) and lv["failed"] == 0 and lv["out_tok_s"] > 0


def test_a_final_verification_measurement_counts_only_when_requests_and_accuracy_hold():
    """What final verification may take from a re-measurement of an accepted config: its paired
    ratio when every request succeeded and the accuracy probe passed, never a faster number
    from a run that failed requests or drifted in its tokens."""
    from arbor.agents.critic.serving_gates import final_ratio

    base = probe([["a", "b", "c", "d"]] * 4)
    good = raw([1, 1, 1], [2, 2, 2], accuracy={"baseline": base, "candidate": probe([["a", "b", "c", "d"]] * 4)})
    assert final_ratio(good, CFG, SCFG) == pytest.approx(score(good, SCFG).ratio)
    assert final_ratio(raw([1, 1, 1], [2, 2, 2]), CFG, SCFG) is not None  # no probe: nothing to regress
    drifted = raw([1, 1, 1], [3, 3, 3], accuracy={"baseline": base, "candidate": probe([["a", "x", "y", "z"]] * 4)})
    assert final_ratio(drifted, CFG, SCFG) is None
    assert final_ratio(raw([1, 1, 1], [3, 3, 3], cand_failed=1), CFG, SCFG) is None
    assert final_ratio(raw([1, 1, 1], [3, 3, 3], base_failed=1), CFG, SCFG) is None
    assert final_ratio(None, CFG, SCFG) is None

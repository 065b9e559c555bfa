"""Knob transforms, safe ``when:`` conditions, and the serving specialist that combines them."""

import json
from datetime import datetime

import pytest

from arbor.agents.priors import OutcomeIndex
from arbor.agents.skills import MoveSpec, SkillError, load_skills, parse_skill
from arbor.agents.specialists.conditions import ConditionError, compile_condition
from arbor.agents.specialists.serving_heuristic import HeuristicServingSpecialist, serving_moves
from arbor.agents.transforms import apply_move
from arbor.agents.transforms.knobs import canonical_config
from arbor.search_tree.records import NodeRecord

CFG = canonical_config({"max_batch_size": 4, "dtype": "float32", "compile": False, "wait_ms": 2.5})


def test_knob_transforms_return_canonical_json_or_none():
    out = json.loads(apply_move(CFG, "knob_scale", {"knob": "max_batch_size", "factor": 2, "max": 64}))
    assert out["max_batch_size"] == 8 and isinstance(out["max_batch_size"], int)
    assert apply_move(CFG, "knob_scale", {"knob": "max_batch_size", "factor": 32, "max": 64}) is None  # over max
    assert json.loads(apply_move(CFG, "knob_scale", {"knob": "max_batch_size", "factor": 1.1}))["max_batch_size"] == 5
    assert json.loads(apply_move(CFG, "knob_scale", {"knob": "wait_ms", "factor": 0.5}))["wait_ms"] == 1.25
    assert json.loads(apply_move(CFG, "knob_set", {"knob": "dtype", "value": "bfloat16"}))["dtype"] == "bfloat16"
    assert apply_move(CFG, "knob_set", {"knob": "dtype", "value": "float32"}) is None  # no change
    assert apply_move(CFG, "knob_set", {"knob": "absent", "value": 1}) is None  # not this campaign's knob
    assert json.loads(apply_move(CFG, "knob_toggle", {"knob": "compile"}))["compile"] is True
    assert apply_move(CFG, "knob_toggle", {"knob": "dtype"}) is None
    # canonical: the same config reached two ways is the same text (one artifact, one measurement)
    a = apply_move(apply_move(CFG, "knob_toggle", {"knob": "compile"}), "knob_set", {"knob": "dtype", "value": "x"})
    b = apply_move(apply_move(CFG, "knob_set", {"knob": "dtype", "value": "x"}), "knob_toggle", {"knob": "compile"})
    assert a == b


def test_bad_knob_params_fail_when_the_skill_loads():
    text = ("---\nname: s\nkind: hard\ndomain: serving\nmoves:\n  - {id: m, transform: knob_scale, "
            "params: {knob: x, factor: 1}, prior: 0.5}\n---\nbody\n")
    with pytest.raises(SkillError, match="factor"):
        parse_skill(text, "s.md")


def test_conditions_are_safe_and_three_valued():
    c = compile_condition("kv_usage < 0.7 and queued > 0")
    assert c.evaluate({"kv_usage": 0.5, "queued": 2}) is True
    assert c.evaluate({"kv_usage": 0.9, "queued": 2}) is False
    assert c.evaluate({"queued": 2}) is None  # kv_usage unknown
    assert c.evaluate({"queued": 0}) is False  # decided without kv_usage
    assert compile_condition("a > 1 or b").evaluate({"a": 2}) is True
    assert compile_condition("itl_p99_ms > 3 * itl_p50_ms").evaluate({"itl_p99_ms": 40, "itl_p50_ms": 10}) is True
    assert compile_condition("dtype in ('float32', 'bfloat16')").evaluate({"dtype": "float32"}) is True
    assert compile_condition("not enforce_eager").evaluate({"enforce_eager": False}) is True
    assert compile_condition("0 < x <= 2").evaluate({"x": 3}) is False
    for bad in ("__import__('os').system('true')", "x.__class__", "open('f')", "[a for a in b]", "lambda: 1",
                "x[0]", "_private > 1", "", "a if b else c"):
        with pytest.raises(ConditionError):
            compile_condition(bad)


def node(nid=1, sha="s"):
    return NodeRecord(id=nid, campaign_id=1, parent_id=None, depth=0, state="accepted", artifact_sha=sha,
                      specialist="x", move_id=None, family=None, hypothesis="", prior=1.0, predicted_gain=None,
                      value=0.0, speedup=1.0, diagnosis="baseline", reason="", step=0,
                      created_at=datetime.now(), finished_at=datetime.now())


MOVES = [
    MoveSpec(id="batch-up", transform="knob_scale", params={"knob": "max_batch_size", "factor": 2}, prior=0.8,
             when="queued > 0.5", family="f"),
    MoveSpec(id="batch-down", transform="knob_scale", params={"knob": "max_batch_size", "factor": 0.5}, prior=0.7,
             when="tpot_slo_ratio > 1", family="f"),
    MoveSpec(id="kv-up", transform="knob_set", params={"knob": "wait_ms", "value": 0.0}, prior=0.6,
             when="kv_usage > 0.9", family="g"),
    MoveSpec(id="bf16", transform="knob_set", params={"knob": "dtype", "value": "bfloat16"}, prior=0.5, family="h"),
    MoveSpec(id="too-big", transform="knob_set", params={"knob": "max_batch_size", "value": 999}, prior=0.9,
             family="f"),
]


def test_specialist_fires_moves_on_symptoms_and_respects_the_knob_table():
    symptoms = {"queued": 3.0, "tpot_slo_ratio": 0.5}
    sp = HeuristicServingSpecialist(MOVES, symptoms_of=lambda n: symptoms,
                                    config_problem=lambda t: "too big" if json.loads(t)["max_batch_size"] > 64 else None)
    opts = sp.options(node(), CFG, set(), lambda sha: False, OutcomeIndex())
    ids = [o.move.id for o in opts]
    # batch-up: queued; kv-up: kv_usage unknown -> half prior; batch-down: TPOT fine -> not offered;
    # too-big: outside the campaign's knob table -> never offered
    assert ids == ["batch-up", "bf16", "kv-up"]
    assert [o.prior for o in opts] == [0.8, 0.5, 0.3]
    props = sp.propose(node(), opts, k=1)
    assert "because queued > 0.5 (queued=3)" in props[0].hypothesis
    # knob values are names too: a condition may read the parent's config
    sp2 = HeuristicServingSpecialist([MoveSpec(id="m", transform="knob_toggle", params={"knob": "compile"},
                                               prior=0.5, when="max_batch_size >= 4")])
    assert [o.move.id for o in sp2.options(node(), CFG, set(), lambda s: False, OutcomeIndex())] == ["m"]


def test_a_broken_when_fails_at_setup():
    with pytest.raises(SkillError, match="when"):
        HeuristicServingSpecialist([MoveSpec(id="m", transform="knob_toggle", params={"knob": "x"}, prior=0.5,
                                             when="os.system('x')")])


def test_shipped_serving_skills_parse_and_select_by_engine():
    skills = load_skills()
    tiny = serving_moves(skills, "tiny", {"max_batch_size", "dtype", "batch_wait_ms"})
    assert tiny and all(m.id.startswith("tiny-") for m in tiny)
    assert {m.params["knob"] for m in tiny} <= {"max_batch_size", "dtype", "batch_wait_ms"}
    vllm = serving_moves(skills, "vllm", {"max_num_seqs", "kv_cache_dtype", "speculative_config"})
    assert {m.id for m in vllm} >= {"vllm-max-num-seqs-x2", "vllm-kv-fp8", "vllm-spec-ngram"}
    assert serving_moves(skills, "sglang", {"chunked_prefill_size"})
    for m in tiny + vllm:  # every shipped condition compiles
        if m.when:
            compile_condition(m.when)


def test_below_a_win_other_values_of_the_winning_knob_come_after_complementary_moves():
    from dataclasses import replace

    from arbor.agents.specialists.kernel_heuristic import HeuristicKernelSpecialist

    moves = [MoveSpec(id="dtype-bf16", transform="knob_set", params={"knob": "dtype", "value": "bfloat16"},
                      prior=0.6, family="precision"),
             MoveSpec(id="dtype-fp16", transform="knob_set", params={"knob": "dtype", "value": "float16"},
                      prior=0.5, family="precision"),
             MoveSpec(id="no-wait", transform="knob_set", params={"knob": "wait_ms", "value": 0.0},
                      prior=0.4, family="latency")]
    parent_cfg = canonical_config({"max_batch_size": 4, "dtype": "bfloat16", "compile": False, "wait_ms": 2.5})
    won = replace(node(2, "p"), parent_id=1, move_id="dtype-bf16", family="precision", diagnosis="improved")
    for spec in (HeuristicServingSpecialist(moves), HeuristicKernelSpecialist(moves)):
        after_win = spec.options(won, parent_cfg, set(), lambda sha: False, OutcomeIndex())
        assert [o.move.id for o in after_win] == ["no-wait", "dtype-fp16"]  # 0.4 before 0.5 x 0.5
        # the same parent, had it not won with that knob, ranks by the declared priors
        plain = spec.options(replace(won, diagnosis="no_gain"), parent_cfg, set(), lambda sha: False, OutcomeIndex())
        assert [o.move.id for o in plain] == ["dtype-fp16", "no-wait"]

from pathlib import Path

import pytest

from arbor.spec import SpecError, load_spec

REPO = Path(__file__).resolve().parents[3]


def write(tmp_path, text, name="c.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_quickstart_is_valid():
    spec = load_spec(REPO / "campaigns" / "quickstart.yaml")
    assert spec.name == "quickstart"
    assert spec.problem_path().is_file()
    assert spec.store_url().endswith("campaigns/arbor.db")
    assert spec.target.tolerances() == (1e-4, 1e-4)


def test_defaults_and_dtype_tolerance(tmp_path):
    spec = load_spec(write(tmp_path, "name: x\ntarget: {problem: p.py, dtype: bfloat16}\n"))
    assert spec.agents.backend == "heuristic" and spec.agents.policy == "puct"
    assert spec.sandbox.kind == "local"
    assert spec.target.tolerances() == (1e-2, 1e-2)
    assert spec.problem_path() == (tmp_path / "p.py").resolve()


@pytest.mark.parametrize("text, needle", [
    ("name: x\n", "target: Field required — add it"),
    ("name: x\ntarget: {problem: p.py}\nbudget: {max_evaluations: 0}\n", "budget.max_evaluations"),
    ("name: x\ntarget: {problem: p.py}\nagents: {policy: best}\n", "agents.policy"),
    ("name: x\ntarget: {problem: p.py, typo_knob: 3}\n", "target.typo_knob: Extra inputs are not permitted — remove it"),
    ("name: 'bad name!'\ntarget: {problem: p.py}\n", "name:"),
    ("- a\n- b\n", "must be a YAML mapping"),
])
def test_invalid_specs_one_line_each(tmp_path, text, needle):
    with pytest.raises(SpecError) as e:
        load_spec(write(tmp_path, text))
    msg = str(e.value)
    assert needle in msg
    for line in e.value.problems:
        assert "\n" not in line and "—" in line


def test_several_problems_each_get_a_line(tmp_path):
    with pytest.raises(SpecError) as e:
        load_spec(write(tmp_path, "name: x\ntarget: {problem: p.py}\nbudget: {max_evaluations: -1, max_wall_s: 0}\n"))
    assert len(e.value.problems) == 2


def test_malformed_yaml_and_missing_file(tmp_path):
    with pytest.raises(SpecError, match=r"malformed YAML at line 3"):
        load_spec(write(tmp_path, "name: x\ntarget: [unclosed\n  bad: : :\n"))
    with pytest.raises(SpecError, match="campaign file not found"):
        load_spec(tmp_path / "nope.yaml")


def test_every_critic_threshold_reaches_the_gates_as_written(tmp_path):
    from arbor.agents.critic.evidence import CriticThresholds

    spec = load_spec(write(tmp_path, "name: c\ntarget: {problem: p.py}\nagents: {seed: 5}\n"
                                     "critic: {max_cv: 0.3, bootstrap_resamples: 1500, reference_drift: 0.0}\n"))
    cfg = spec.critic.gate_config(spec.agents.seed)
    assert (cfg.max_cv, cfg.bootstrap_resamples, cfg.reference_drift, cfg.seed) == (0.3, 1500, 0.0, 5)
    assert {k: getattr(cfg, k) for k in CriticThresholds.model_fields} == \
        spec.critic.model_dump(include=set(CriticThresholds.model_fields))
    with pytest.raises(SpecError, match="critic.bootstrap_resamples"):
        load_spec(write(tmp_path, "name: c\ntarget: {problem: p.py}\ncritic: {bootstrap_resamples: 10}\n"))
    with pytest.raises(SpecError, match="critic.seed"):  # the seed is the campaign's (agents.seed)
        load_spec(write(tmp_path, "name: c\ntarget: {problem: p.py}\ncritic: {seed: 1}\n"))

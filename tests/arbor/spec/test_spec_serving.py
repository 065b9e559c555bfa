from pathlib import Path

import pytest

from arbor.spec import SpecError, load_spec
from arbor.targets import make_adapter

REPO = Path(__file__).resolve().parents[3]

BASE = """name: s
target:
  kind: serving
  model: m
  command: "{python} server.py --port {port} --batch {batch}"
  knobs:
    batch: {default: 4, min: 1, max: 64}
  load: {concurrency: [1, 4]}
  slo: {e2e_ms: 500}
"""


def write(tmp_path, text):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("name", ["serving_cpu", "vllm_qwen7b_dummy", "sglang_qwen7b_dummy"])
def test_shipped_serving_campaigns_validate(name):
    spec = load_spec(REPO / "campaigns" / f"{name}.yaml")
    assert spec.target.kind == "serving"
    assert spec.objective.metric == "throughput_at_slo" and spec.objective.direction == "maximize"
    assert "{port}" in " ".join(spec.target.argv_template())


def test_kernel_campaigns_keep_working_without_a_kind(tmp_path):
    spec = load_spec(write(tmp_path, "name: k\ntarget: {problem: p.py}\n"))
    assert spec.target.kind == "kernel" and spec.objective.metric == "latency"


def test_knobs_render_into_the_command(tmp_path):
    text = BASE.replace("--batch {batch}", "--batch {batch} {flag} {maybe}").replace(
        "    batch: {default: 4, min: 1, max: 64}\n",
        "    batch: {default: 4, min: 1, max: 64}\n    flag: {default: true, arg: --fast, arg_false: --slow}\n"
        "    maybe: {default: null, choices: [null, '{\"k\": 1}'], arg: \"--json '{value}'\"}\n")
    (tmp_path / "server.py").write_text("")
    spec = load_spec(write(tmp_path, text))
    a = make_adapter(spec)
    argv = a.render_argv(spec.target.defaults())
    assert argv[1:] == ["server.py", "--port", "{port}", "--batch", "4", "--fast"]
    cfg = {**spec.target.defaults(), "flag": False, "maybe": '{"k": 1}'}
    assert a.render_argv(cfg)[-3:] == ["--slow", "--json", '{"k": 1}']
    assert a.config_problem(a.canonical({**cfg, "batch": 65})) == "batch=65 lies outside [1.0, 64.0]"
    assert a.config_problem(a.canonical({**cfg, "typo": 1})).startswith("unknown knob")
    assert a.config_problem(a.root_source()) is None


@pytest.mark.parametrize("edit, needle", [
    (("{batch}", "{bacth}"), "unknown placeholder(s) {bacth}"),
    (("--port {port} ", ""), "must contain {port}"),
    (("default: 4, min: 1", "default: 99, min: 1"), "default 99 lies outside"),
    (("load: {concurrency: [1, 4]}", "load: {concurrency: [1], request_rates: [2.0]}"), "exactly one of"),
    (("slo: {e2e_ms: 500}", "slo: {percentile: 99}"), "at least one of"),
    (("kind: serving", "kind: servng"), "unknown target kind"),
    (("  knobs:\n", "  knobs:\n    port: {default: 1}\n"), "reserved"),
    (("name: s\n", "name: s\nobjective: {metric: latency}\n"), "does not fit a serving target"),
])
def test_serving_spec_errors_are_one_line_with_a_fix(tmp_path, edit, needle):
    with pytest.raises(SpecError) as e:
        load_spec(write(tmp_path, BASE.replace(*edit)))
    assert needle in str(e.value), str(e.value)
    for line in e.value.problems:
        assert "\n" not in line and "—" in line
        assert "target.serving." not in line  # the union tag is not a field the user wrote


def test_a_knob_that_changes_nothing_is_an_error(tmp_path):
    text = BASE.replace("    batch: {default: 4, min: 1, max: 64}\n",
                        "    batch: {default: 4, min: 1, max: 64}\n    unused: {default: 1}\n")
    with pytest.raises(SpecError, match="appear in neither command nor env"):
        load_spec(write(tmp_path, text))


def test_missing_server_binary_is_a_user_error(tmp_path):
    spec = load_spec(write(tmp_path, BASE.replace("{python} server.py", "no-such-server-binary")))
    with pytest.raises(SpecError, match="not installed here"):
        make_adapter(spec).validate()

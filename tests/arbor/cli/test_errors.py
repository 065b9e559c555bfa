"""Bad input: one line per problem on stderr, exit code 2, never a traceback."""

import pytest

from tests.arbor.helpers import arbor, write_campaign


def assert_one_line_error(r, needle):
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error:") and needle in lines[0]


def test_malformed_yaml(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: x\ntarget: {problem: [oops\n")
    assert_one_line_error(arbor("run", str(p)), "malformed YAML")


def test_missing_problem_file(campaign_dir):
    spec = write_campaign(campaign_dir, "missing", problem="problems/does_not_exist.py")
    assert_one_line_error(arbor("run", str(spec)), "problem file not found")


def test_problem_without_model(campaign_dir):
    (campaign_dir / "problems" / "nomodel.py").write_text(
        "import torch\ndef get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n    return []\n")
    spec = write_campaign(campaign_dir, "nomodel", problem="problems/nomodel.py")
    assert_one_line_error(arbor("run", str(spec)), "Model")


def test_invalid_field_and_read_commands_without_store(tmp_path, campaign_dir):
    p = tmp_path / "c.yaml"
    p.write_text("name: x\ntarget: {problem: p.py}\nagents: {policy: best}\n")
    assert_one_line_error(arbor("run", str(p)), "agents.policy")
    assert_one_line_error(arbor("history", str(tmp_path / "nope.db")), "store not found")
    spec = write_campaign(campaign_dir, "fresh")
    assert_one_line_error(arbor("show", "1", str(spec)), "no campaign named 'fresh'")


@pytest.mark.parametrize("sql", ["delete from nodes", "drop table nodes"])
def test_query_refuses_writes(campaign_dir, sql):
    spec = write_campaign(campaign_dir, "q")
    from arbor.search_tree import open_store
    from arbor.spec import load_spec

    open_store(load_spec(spec).store_url()).close()
    assert_one_line_error(arbor("query", sql, "--store", str(spec)), "read-only")

"""``arbor skills list|show``: built-ins, user directories, JSON output, one-line errors."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from arbor.cli import app

runner = CliRunner()


def test_list_json_has_every_kind_and_filters():
    r = runner.invoke(app, ["skills", "list", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    names = {x["name"] for x in rows}
    assert {"cuda-graphs", "quantization-kv-cache", "budget-pacing", "stop-conditions",
            "reprofile-after-accept", "triton-tiling"} <= names
    soft = json.loads(runner.invoke(app, ["skills", "list", "--kind", "soft", "--json"]).stdout)
    assert soft and all(x["kind"] == "soft" and not x["moves"] for x in soft)


def test_show_prints_moves_and_body():
    r = runner.invoke(app, ["skills", "show", "torch-compile"])
    assert r.exit_code == 0 and "compile-default" in r.output and "TorchInductor" in r.output
    data = json.loads(runner.invoke(app, ["skills", "show", "torch-compile", "--json"]).stdout)
    assert data["moves"][0]["transform"] == "wrap_compile" and "## When it helps" in data["body"]


def test_user_dirs_are_listed_and_can_override(tmp_path):
    (tmp_path / "mine.md").write_text("---\nname: my-protocol\nkind: soft\ndomain: any\n---\n# Mine\n\nDo one thing.\n")
    r = runner.invoke(app, ["skills", "list", "--dir", str(tmp_path), "--json"])
    assert "my-protocol" in {x["name"] for x in json.loads(r.stdout)}
    spec = tmp_path / "c.yaml"
    spec.write_text(f"name: c\ntarget:\n  problem: p.py\nskills:\n  extra_dirs: [{tmp_path}]\n")
    r = runner.invoke(app, ["skills", "show", "my-protocol", "--spec", str(spec)])
    assert r.exit_code == 0 and "Do one thing." in r.output


def test_errors_are_one_line_with_exit_2(tmp_path):
    r = runner.invoke(app, ["skills", "show", "cuda-graph"])
    assert r.exit_code == 2 and "did you mean cuda-graphs" in r.output
    (tmp_path / "bad.md").write_text("---\nname: Bad Name\nkind: hard\ndomain: kernel\n---\nbody\n")
    r = runner.invoke(app, ["skills", "list", "--dir", str(tmp_path)])
    assert r.exit_code == 2 and "bad.md: name:" in r.output and "Traceback" not in r.output

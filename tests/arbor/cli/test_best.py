"""`arbor best`: a header on the written winner, an honest "no win", no stray files with --json,
`arbor --version`, and the README's command table matching `arbor --help`."""

from __future__ import annotations

import json
import re
from pathlib import Path

from arbor.search_tree import open_store

from tests.arbor.helpers import arbor

ROOT = Path(__file__).resolve().parents[3]
WIN = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def _store(path: Path, win: bool) -> None:
    store = open_store(f"sqlite:///{path}")
    camp = store.get_or_create_campaign("k", "kernel", {"target": {"kind": "kernel", "problem": "/abs/p.py"}})
    root = store.add_node(camp.id, store.put_artifact("# baseline\n", "python"), "baseline")
    store.update_campaign(camp.id, root_node_id=root.id)
    _judge(store, root.id, "accept", "baseline", 0.0, 1.0)
    child = store.add_node(camp.id, store.put_artifact(WIN, "python"), "h", parent_id=root.id, move_id="m")
    if win:
        _judge(store, child.id, "accept", "improved", 0.4, 1.5)
    else:
        _judge(store, child.id, "reject", "no_gain", None, None)
    store.close()


def _judge(store, nid, decision, diagnosis, value, speedup):
    store.transition(nid, "queued")
    store.start_running(nid, "test-owner")
    m = store.record_measurement(nid, 1, "primary", {"status": "ok", "baseline_samples": [1.0],
                                                     "candidate_samples": [0.66], "duration_s": 1.0}, "local")
    stats = {"speedup": 1.5, "ci_low": 1.4, "ci_high": 1.6}
    fields = {"value": value, "speedup": speedup} if decision == "accept" else {}
    store.record_verdict(nid, m.id, decision, diagnosis, "r", [{"stats": stats}],
                         final_state="accepted" if decision == "accept" else "rejected", **fields)


def test_best_writes_a_header(tmp_path):
    _store(tmp_path / "arbor.db", win=True)
    r = arbor("best", "arbor.db", "-o", "win.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "win.py").read_text()
    head = text.split("import torch")[0]
    for want in ("campaign k, node 2", "speedup 1.500x (95% CI [1.400, 1.600])", "sha256", "written",
                 "re-verify: arbor eval /abs/p.py win.py"):
        assert want in head, want
    compile(text, "win.py", "exec")  # still a valid module


def test_best_json_writes_no_file_unless_asked(tmp_path):
    _store(tmp_path / "arbor.db", win=True)
    r = arbor("best", "arbor.db", "--json", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["path"] is None
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("arbor.db")) == []


def test_best_without_a_win_says_so(tmp_path):
    _store(tmp_path / "arbor.db", win=False)
    r = arbor("best", "arbor.db", cwd=tmp_path)
    assert r.returncode == 1 and "no candidate beat the baseline" in r.stderr
    assert not (tmp_path / "best_modelnew.py").exists() and "1.000x" not in r.stdout + r.stderr


def test_version_and_readme_command_table():
    r = arbor("--version")
    assert r.returncode == 0 and re.fullmatch(r"arbor \d+\.\d+\.\d+\S*\n", r.stdout)
    helptext = arbor("--help").stdout
    listed = set(re.findall(r"│ ([a-z][a-z-]+) {2,}", helptext))
    readme = (ROOT / "README.md").read_text()
    table = set(re.findall(r"^\| `arbor ([a-z][a-z-]+)", readme, re.MULTILINE))
    assert listed and listed == table, (listed - table, table - listed)

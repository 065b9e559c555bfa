"""One candidate through the campaign machinery: `arbor eval`, `arbor enqueue`, `arbor retry`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from arbor.campaign.enqueue import open_for_write
from arbor.campaign.retry_node import retry
from arbor.search_tree.store import StoreError
from arbor.spec import load_spec

from tests.arbor.helpers import arbor, write_campaign

ROOT = Path(__file__).resolve().parents[3]

FAST_GELU = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x, gate):
        return F.gelu(x, approximate="tanh") * F.silu(gate)
'''

BROKEN = "import torch\nclass ModelNew(torch.nn.Module:\n    pass\n"


@pytest.fixture()
def camp(tmp_path) -> Path:
    (tmp_path / "problems").mkdir()
    shutil.copy(ROOT / "campaigns/problems/gelu_gate.py", tmp_path / "problems/gelu_gate.py")
    (tmp_path / "fast.py").write_text(FAST_GELU)
    (tmp_path / "broken.py").write_text(BROKEN)
    return write_campaign(tmp_path, "cand", max_evaluations=1, extra="agents:\n  proposals_per_step: 1\n")


@pytest.mark.slow
def test_eval_one_candidate(camp):
    d = camp.parent
    r = arbor("eval", "problems/gelu_gate.py", "fast.py", "--spec", camp.name, "--json", cwd=d)
    res = json.loads(r.stdout)
    assert res["compiled"] and res["correct"] and res["speedup"] and res["ci"] and res["decision"], r.stderr
    assert r.returncode == (0 if res["decision"] == "accept" else 1)
    assert not (d / "arbor.db").exists()  # a temporary store, nothing left in the folder
    r = arbor("eval", "problems/gelu_gate.py", "broken.py", "--spec", camp.name, cwd=d)
    assert r.returncode == 1 and "compiled   no" in r.stdout and "verdict" in r.stdout
    r = arbor("eval", "problems/gelu_gate.py", "missing.py", cwd=d)
    assert r.returncode == 2 and "file not found" in r.stderr


@pytest.mark.slow
def test_enqueue_measures_the_users_file_on_the_next_run(camp):
    d = camp.parent
    r = arbor("enqueue", camp.name, "fast.py", "--json", cwd=d)
    assert r.returncode == 0, r.stderr
    node = json.loads(r.stdout)["node"]
    again = arbor("enqueue", camp.name, "fast.py", cwd=d)
    assert again.returncode == 2 and f"already node {node}" in again.stderr
    assert arbor("run", camp.name, "-q", "--json", cwd=d).returncode in (0, 1)
    shown = json.loads(arbor("show", str(node), camp.name, "--json", cwd=d).stdout)
    assert shown["node"]["state"] in ("accepted", "rejected") and shown["measurements"]
    assert shown["node"]["move"] == "user:fast.py"


def test_retry_only_unstable_nodes(camp):
    store, c, target = open_for_write(load_spec(camp))
    try:
        with pytest.raises(StoreError, match="baseline cannot be retried"):
            retry(store, c, target, c.root_node_id)
        # a node rejected as unstable: written through the store as the Critic would
        sha = store.put_artifact(FAST_GELU, target.artifact_kind)
        n = store.add_node(c.id, sha, "heuristic", parent_id=c.root_node_id, move_id="m", family="f",
                           state="proposed")
        store.transition(n.id, "rejected", diagnosis="unstable", reason="cv too high")
        new = retry(store, c, target, n.id)
        assert new.parent_id == c.root_node_id and new.state == "proposed" and f"retry of node {n.id}" in new.hypothesis
        assert store.get_artifact(new.artifact_sha).rstrip("\n") == FAST_GELU.rstrip("\n")
        with pytest.raises(StoreError, match="only a node"):
            retry(store, c, target, new.id)  # not rejected
    finally:
        store.close()
    assert arbor("retry", "999", camp.name, cwd=camp.parent).returncode == 2

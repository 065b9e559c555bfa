"""Managing the campaigns of one store: ls, rename, rm, node ids refused across campaigns,
query scoped to a campaign, the documented views, JSON errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arbor.campaign.run import run_campaign
from arbor.search_tree import open_store
from arbor.spec import parse_spec
from arbor.targets.landscape import FORMAT, Landscape

from tests.arbor.helpers import arbor


def _sp(speedup: float, n: int = 12) -> dict:
    return {"b": [1.0 * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)],
            "c": [(1.0 / speedup) * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)]}


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("camps")
    ls = Landscape.model_validate({
        "format": FORMAT, "name": "two",
        "knobs": [{"name": "K", "values": ["A", "B", "C"], "default": "A"}],
        "points": [{"knobs": {"K": "A"}, "runs": [_sp(1.0)] * 3}, {"knobs": {"K": "B"}, "runs": [_sp(1.5)] * 3},
                   {"knobs": {"K": "C"}, "runs": [_sp(0.7)] * 3}],
        "campaign": {"critic": {"max_cv": 0.5}, "measurement": {"seeds": [0]}},
    })
    ls.dump(d / "two.json")
    for name in ("alpha", "beta"):
        spec = parse_spec({"name": name, "target": {"kind": "replay", "landscape": "two.json", "moves": "any"},
                           "budget": {"max_evaluations": 2}, "critic": {"max_cv": 0.5, "min_speedup": 1.02}},
                          "<test>", d)
        run_campaign(spec, lambda *a: None)
    return d


def _json(*args, cwd):
    r = arbor(*args, "--json", cwd=cwd)
    return r.returncode, json.loads(r.stdout)


def test_ls_rename_rm(store_dir, tmp_path):
    import shutil

    shutil.copy(store_dir / "arbor.db", tmp_path / "arbor.db")
    code, rows = _json("campaigns", "ls", cwd=tmp_path)
    assert code == 0 and [r["name"] for r in rows] == ["alpha", "beta"] and rows[0]["nodes"] >= 2
    assert _json("campaigns", "rename", "alpha", "gamma", cwd=tmp_path)[0] == 0
    code, err = _json("campaigns", "rename", "beta", "gamma", cwd=tmp_path)
    assert code == 2 and "already exists" in err["error"]
    code, res = _json("campaigns", "rm", "gamma", cwd=tmp_path)
    assert code == 0 and res["nodes"] >= 2
    assert [r["name"] for r in _json("campaigns", "ls", cwd=tmp_path)[1]] == ["beta"]
    store = open_store(f"sqlite:///{tmp_path / 'arbor.db'}")
    try:  # beta is intact and the append-only trigger is back
        beta = store.get_campaign("beta")
        assert store.nodes(beta.id) and store.events(beta.id)
        with pytest.raises(Exception):
            with store.engine.begin() as conn:
                conn.exec_driver_sql("DELETE FROM events")
    finally:
        store.close()


def test_node_of_another_campaign_is_refused(store_dir):
    store = open_store(f"sqlite:///{store_dir / 'arbor.db'}", read_only=True)
    beta_node = store.nodes(store.get_campaign("beta").id)[0].id
    store.close()
    r = arbor("show", str(beta_node), "arbor.db", "--campaign", "alpha", cwd=store_dir)
    assert r.returncode == 2 and "belongs to campaign 'beta'" in r.stderr and "--campaign beta" in r.stderr
    assert arbor("show", str(beta_node), "arbor.db", "--campaign", "beta", cwd=store_dir).returncode == 0


def test_query_campaign_and_views(store_dir):
    code, rows = _json("query", "SELECT campaign, count(*) AS n FROM v_nodes GROUP BY campaign", "--store",
                       "arbor.db", cwd=store_dir)
    assert code == 0 and {r["campaign"] for r in rows} == {"alpha", "beta"}
    code, rows = _json("query", "SELECT DISTINCT campaign_id FROM nodes", "--store", "arbor.db",
                       "--campaign", "beta", cwd=store_dir)
    assert code == 0 and len(rows) == 1
    code, rows = _json("query", "WITH x AS (SELECT * FROM v_verdicts) SELECT campaign, move, decision, "
                       "critic_speedup, verified_speedup, diagnosis FROM x", "--store", "arbor.db",
                       "--campaign", "alpha", cwd=store_dir)
    assert code == 0 and rows and {r["campaign"] for r in rows} == {"alpha"}
    assert any(r["critic_speedup"] for r in rows if r["move"])
    assert _json("query", "SELECT * FROM v_measurements", "--store", "arbor.db", cwd=store_dir)[0] == 0
    code, err = _json("query", "DELETE FROM nodes", "--store", "arbor.db", cwd=store_dir)
    assert code == 2 and "read-only" in err["error"]


def test_compare_two_campaigns(store_dir, tmp_path):
    r = arbor("compare", "arbor.db", "arbor.db", "--campaign-a", "alpha", "--campaign-b", "beta",
              "-o", str(tmp_path / "cmp"), "--json", cwd=store_dir)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    for s in (res["a"], res["b"]):
        assert s["evaluations"] >= 1 and s["best_speedup"] and s["evals_to_best"] and s["families"]
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "alpha vs beta" in md and "evaluations to best" in md and "![" in md
    assert (tmp_path / "cmp" / "compare.png").read_bytes()[:4] == b"\x89PNG"
    r = arbor("compare", "arbor.db", "arbor.db", cwd=store_dir)
    assert r.returncode == 2 and "--campaign" in r.stderr  # several campaigns: pick one

"""``arbor report`` and ``arbor export`` against a real campaign's store (and a serving store)."""

from __future__ import annotations

import base64
import csv
import json
import re

import pytest

from arbor.report import load, write_report
from arbor.report.data import fingerprint_id
from arbor.search_tree import open_store
from tests.arbor.helpers import arbor, arbor_json


@pytest.fixture(scope="module")
def store(shared):
    s = open_store(f"sqlite:///{shared.db}", read_only=True)
    yield s
    s.close()


@pytest.fixture(scope="module")
def report(shared, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    info = arbor_json("report", str(shared.yaml), "-o", str(out))
    return out, info


def test_report_files_exist(report):
    out, info = report
    assert (out / "report.html").is_file() and (out / "report.md").is_file()
    for key in ("score", "speedups", "tree"):
        png = out / f"{key}.png"
        assert info["figures"][key] == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "pareto" not in info["figures"]  # a kernel campaign has no throughput-latency front


def test_html_is_self_contained(report, store):
    out, _ = report
    html = (out / "report.html").read_text()
    assert "<script" not in html and "<link" not in html and "href=" not in html
    srcs = re.findall(r"src='([^']*)'", html) + re.findall(r'src="([^"]*)"', html)
    assert len(srcs) == 3 and all(s.startswith("data:image/png;base64,") for s in srcs)
    for s in srcs:
        assert base64.b64decode(s.split(",", 1)[1])[:4] == b"\x89PNG"
    for section in ("Summary", "Score over evaluations", "Speedup distribution", "The tree", "Top candidates",
                    "Best artifact"):
        assert f"<h2>{section}</h2>" in html


def test_report_content_matches_the_store(report, store):
    out, _ = report
    md = (out / "report.md").read_text()
    for img in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md):
        assert (out / img).is_file()
    camp = store.get_campaign("dash")
    data = load(store, camp)
    root = data.root
    assert f"| ref | {root.id} | baseline (A/A) |" in md
    fp = next(m.fingerprint for m in store.measurements(root.id) if m.fingerprint)
    assert fingerprint_id(fp) in md
    if data.best is not None:  # the best artifact, inline and verbatim
        assert store.get_artifact(data.best.artifact_sha).rstrip() in md
    for c in data.candidates:
        lo = c.stats.get("ci_low")
        if lo is not None:
            assert f"{lo:.3f}x" in md
    assert f"| status | {camp.status} |" in md
    # the loop profiles the baseline: its profile event, as stored, heads the bottleneck section
    base = [e for e in store.events(camp.id, limit=10_000, kinds=["profile"]) if e.node_id == root.id]
    assert ("## Bottleneck profile" in md) == bool(data.profiles) == bool(base)
    if base and not base[-1].payload.get("error"):
        assert f"baseline (node {root.id}): {base[-1].payload['call_ms']:.3f} ms per call" in md
        assert f"| {base[-1].payload['ops'][0]['op']} |" in md


def test_serving_fronts_are_drawn_from_measurement_stats(tmp_path):
    w = open_store(f"sqlite:///{tmp_path / 'arbor.db'}")
    camp = w.get_or_create_campaign("srv", "serving", {"target": {"kind": "serving"}, "budget": {}})
    root = w.add_node(camp.id, w.put_artifact("{}", "serving_config"), "baseline")
    best = w.add_node(camp.id, w.put_artifact('{"max_num_seqs": 64}', "serving_config"), "serving",
                      parent_id=root.id, move_id="max-num-seqs-x2")
    w.update_campaign(camp.id, root_node_id=root.id)
    for node, scale, value in ((root, 1.0, 0.0), (best, 1.6, 0.47)):
        points = [{"concurrency": c, "p99_latency_s": 0.1 * c ** 0.5, "throughput_tok_s": scale * 100 * c ** 0.7}
                  for c in (1, 4, 16)]
        w.transition(node.id, "queued")
        w.start_running(node.id, "t")
        m = w.record_measurement(node.id, 1, "primary", {"status": "ok", "stats": {"pareto": points}}, "local")
        w.record_verdict(node.id, m.id, "accept", "improved", "ok", [], final_state="accepted",
                         value=value, speedup=scale)
    files = write_report(load(w, w.get_campaign("srv")), tmp_path / "rep")
    assert "pareto" in files.figures
    html = files.html.read_text()
    assert "Pareto fronts (serving)" in html and html.count("data:image/png;base64,") == 4


def test_export_json_matches_the_store(shared, store, tmp_path):
    out = tmp_path / "x.json"
    r = arbor("export", str(shared.yaml), "--format", "json", "-o", str(out))
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    camp = store.get_campaign("dash")
    nodes = store.nodes(camp.id)
    assert [(n["id"], n["state"], n["speedup"]) for n in data["nodes"]] == [(n.id, n.state, n.speedup) for n in nodes]
    ms = [m for n in nodes for m in store.measurements(n.id)]
    assert sorted(m["id"] for m in data["measurements"]) == sorted(m.id for m in ms)
    by_id = {m.id: m for m in ms}
    for m in data["measurements"]:
        assert m["baseline_samples"] == by_id[m["id"]].baseline_samples
        assert m["fingerprint"] == by_id[m["id"]].fingerprint
    vs = [v for n in nodes for v in store.verdicts(n.id)]
    assert sorted((v["id"], v["decision"], v["diagnosis"]) for v in data["verdicts"]) == \
        sorted((v.id, v.decision, v.diagnosis) for v in vs)
    assert data["campaign"]["name"] == "dash"
    # no -o: the same document on stdout
    r2 = arbor("export", str(shared.yaml))
    assert r2.returncode == 0 and json.loads(r2.stdout)["nodes"] == data["nodes"]


def test_export_csv_one_file_per_table(shared, store, tmp_path):
    out = tmp_path / "csv"
    r = arbor("export", str(shared.db), "-f", "csv", "-o", str(out))
    assert r.returncode == 0, r.stderr
    camp = store.get_campaign("dash")
    nodes = store.nodes(camp.id)
    with (out / "nodes.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [(int(r["id"]), r["state"], r["move_id"]) for r in rows] == [(n.id, n.state, n.move_id or "") for n in nodes]
    with (out / "measurements.csv").open() as fh:
        mrows = list(csv.DictReader(fh))
    ms = {m.id: m for n in nodes for m in store.measurements(n.id)}
    assert sorted(int(r["id"]) for r in mrows) == sorted(ms)
    for r in mrows:
        assert json.loads(r["candidate_samples"]) == ms[int(r["id"])].candidate_samples
    with (out / "verdicts.csv").open() as fh:
        vrows = list(csv.DictReader(fh))
    vs = {v.id: v for n in nodes for v in store.verdicts(n.id)}
    assert {int(r["id"]): r["reason"] for r in vrows} == {i: v.reason for i, v in vs.items()}
    assert all(isinstance(g, dict) for r in vrows for g in json.loads(r["gates"]))


def test_user_errors_are_one_line(tmp_path, shared):
    r = arbor("export", str(shared.yaml), "--format", "xml")
    assert r.returncode == 2 and "use json or csv" in r.stderr
    r = arbor("report", str(tmp_path / "nothing.db"))
    assert r.returncode == 2 and "store not found" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "nothing.db").exists()


def test_serving_fronts_come_from_the_critics_verdict(tmp_path):
    """The serving Critic stores both fronts (measured interleaved) in the best node's accept verdict."""
    w = open_store(f"sqlite:///{tmp_path / 'arbor.db'}")
    camp = w.get_or_create_campaign("srv2", "serving", {"target": {"kind": "serving"}, "budget": {}})
    root = w.add_node(camp.id, w.put_artifact("{}", "serving_config"), "baseline")
    best = w.add_node(camp.id, w.put_artifact('{"max_num_seqs": 64}', "serving_config"), "serving",
                      parent_id=root.id, move_id="max-num-seqs-x2")
    w.update_campaign(camp.id, root_node_id=root.id)
    stats = {"speedup": 1.4, "ratio": 1.4, "ci_low": 1.2, "ci_high": 1.6, "metric": "throughput_at_slo",
             "pareto_improvement_pct": 37.5,
             "front_baseline": [[2.0, 120.0, "c1"], [5.0, 300.0, "c4"]],
             "front_candidate": [[3.0, 110.0, "c1"], [7.0, 280.0, "c4"]]}
    for node, value, sp, st in ((root, 0.0, 1.0, {}), (best, 0.34, 1.4, stats)):
        w.transition(node.id, "queued")
        w.start_running(node.id, "t")
        m = w.record_measurement(node.id, 1, "primary", {"status": "ok"}, "local")
        w.record_verdict(node.id, m.id, "accept", "improved", "ok", [{"stats": st}] if st else [],
                         final_state="accepted", value=value, speedup=sp)
    data = load(w, w.get_campaign("srv2"))
    assert [f.points for f in data.fronts] == [[(120.0, 2.0), (300.0, 5.0)], [(110.0, 3.0), (280.0, 7.0)]]
    files = write_report(data, tmp_path / "rep")
    assert "pareto" in files.figures
    assert "+37.5% hypervolume" in files.markdown.read_text()

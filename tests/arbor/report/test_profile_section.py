"""The report's bottleneck section, from ``profile`` events as the loop stores them."""

from __future__ import annotations

from arbor.report import load
from arbor.report.render import render_html, render_markdown
from arbor.sandbox.kernel.profile_job import summarize
from arbor.search_tree import open_store

PEAK = {"flops_per_s": 5e11, "bytes_per_s": 2e10, "source": "test-cpu"}
MOVED = (256 * 512 + 512 * 512 + 256 * 512) * 4  # its own bytes: inputs read, output written


def _raw(first: str, first_us: float) -> dict:
    return {"call_ms": 1.25, "iters": 10, "ops": [
        {"name": f"aten::{first}", "calls": 1, "self_us": first_us, "shapes": [[256, 512], [512, 512]],
         "flops": 2 * 256 * 512 * 512, "bytes": MOVED, "footprint": MOVED},
        {"name": "aten::gelu", "calls": 1, "self_us": 200.0, "shapes": [[256, 512]], "flops": None},
        {"name": "aten::add", "calls": 2, "self_us": 100.0, "shapes": [[256, 512], [256, 512]], "flops": None}]}


def _campaign(tmp_path, profiles):  # type: ignore[no-untyped-def]
    tmp_path.mkdir(parents=True, exist_ok=True)
    w = open_store(f"sqlite:///{tmp_path / 'arbor.db'}")
    camp = w.get_or_create_campaign("prof", "kernel", {"target": {"kind": "kernel", "problem": "p.py"}, "budget": {}})
    root = w.add_node(camp.id, w.put_artifact("class ModelNew: pass\n", "kernel_source"), "baseline")
    nodes = {"root": root}
    for name in ("first", "second"):
        nodes[name] = w.add_node(camp.id, w.put_artifact(f"# {name}\nclass ModelNew: pass\n", "kernel_source"),
                                 "heuristic", parent_id=root.id, move_id=f"move-{name}")
    w.update_campaign(camp.id, root_node_id=root.id)
    for n, value in ((root, 0.0), (nodes["first"], 0.1), (nodes["second"], 0.3)):
        w.transition(n.id, "queued")
        w.start_running(n.id, "t")
        m = w.record_measurement(n.id, 1, "primary", {"status": "ok"}, "local")
        w.record_verdict(n.id, m.id, "accept", "improved", "ok", [], final_state="accepted", value=value,
                         speedup=2.718 ** value)
    for key, why, payload in profiles:
        w.append_event(camp.id, "profile", {"why": why, **payload}, node_id=nodes[key].id, agent="profiler")
    return w, nodes


def test_the_report_shows_the_baseline_and_the_latest_best_profile(tmp_path):
    base = summarize(_raw("addmm", 700.0), "float32", PEAK)
    old = summarize(_raw("mm", 300.0), "float32", PEAK)
    new = summarize(_raw("bmm", 50.0), "float32", None)
    w, nodes = _campaign(tmp_path, [("root", "baseline", base), ("first", "new best", old),
                                    ("second", "new best", new)])
    data = load(w, w.get_campaign("prof"))
    md, page = render_markdown(data, {}, {}, "now"), render_html(data, {}, "now")
    assert "## Bottleneck profile" in md and "<h2>Bottleneck profile</h2>" in page
    section = md.split("## Bottleneck profile", 1)[1].split("\n## ", 1)[0]
    assert f"baseline (node {nodes['root'].id}): 1.250 ms per call" in section
    assert f"latest new best (node {nodes['second'].id})" in section
    assert f"node {nodes['first'].id})" not in section  # an earlier best's profile is superseded
    assert "aten::mm" not in section
    # the dominant op with its share, FLOPs, bytes and place against the peaks
    top = next(line for line in section.splitlines() if line.startswith("| aten::addmm "))
    share = 700.0 / 1000.0
    secs = 700e-6
    flops = 2 * 256 * 512 * 512
    assert f"| {share:.1%} |" in top and f"| {flops / 1e9:.3g} |" in top
    assert f"| {MOVED / 1e6:.3g} |" in top
    assert f"| {flops / secs / 5e11:.1%} |" in top
    assert "dominant op aten::addmm (compute-bound against the peaks)" in section
    assert "read against 500 GFLOP/s, 20 GB/s stream (test-cpu)" in section
    assert "time by kind: gemm 70%, elementwise 30%" in section
    # the latest best's profile had no known peaks: it says so, and its fractions are blank
    assert "device peaks unknown" in section
    bmm = next(line for line in section.splitlines() if line.startswith("| aten::bmm "))
    assert bmm.rstrip(" |").endswith("— | —")


def test_an_impossible_reading_is_a_bug_in_the_caption_not_a_number(tmp_path):
    raw = _raw("addmm", 700.0)
    raw["ops"][0]["self_us"] = 1e6 * MOVED / 2e10 / 10  # ten times the peak bandwidth
    p = summarize(raw, "float32", PEAK)
    w, nodes = _campaign(tmp_path, [("root", "baseline", p)])
    section = render_markdown(load(w, w.get_campaign("prof")), {}, {}, "now").split("## Bottleneck profile", 1)[1]
    assert "BUG — impossible readings, not shown: " in section and "aten::addmm read 1000% of peak bandwidth" in section
    top = next(line for line in section.splitlines() if line.startswith("| aten::addmm "))
    assert top.rstrip(" |").endswith("— | —") or "1000" not in top


def test_a_failed_profile_is_a_caption_and_no_profile_no_section(tmp_path):
    w, nodes = _campaign(tmp_path, [("root", "baseline", {"error": "profile failed: boom"})])
    md = render_markdown(load(w, w.get_campaign("prof")), {}, {}, "now")
    section = md.split("## Bottleneck profile", 1)[1].split("\n## ", 1)[0]
    assert f"baseline (node {nodes['root'].id}): no profile (profile failed: boom)." in section
    assert "| op |" not in section
    w2, _ = _campaign(tmp_path / "two", [])
    assert "Bottleneck profile" not in render_markdown(load(w2, w2.get_campaign("prof")), {}, {}, "now")

"""Compile time apart from timing: the compile event, the summary's view of a compiled best and
the line `arbor show` prints (arbor/campaign/compile_times.py)."""

from __future__ import annotations

from types import SimpleNamespace as NS

from arbor.campaign import compile_times
from arbor.search_tree.records import MeasurementRecord


def _m(attempt, purpose, compile_s, cache, duration, status="ok"):
    return MeasurementRecord(id=attempt, node_id=5, artifact_sha="x", attempt=attempt, purpose=purpose, status=status,
                             error_class=None, error_text=None, duration_s=duration,
                             stats={"compile": {"compile_s": compile_s, "cache": cache, "first_call_s": compile_s}})


def test_a_compiled_best_reports_its_first_and_later_measurements():
    ms = [_m(1, "primary", 24.0, "miss", 36.0), _m(2, "confirm", 2.8, "hit", 12.0), _m(3, "final", 2.6, "hit", 11.0),
          _m(4, "final", 2.0, "hit", 10.0, status="error")]  # a failed measurement says nothing
    c = compile_times.of_node(ms)
    assert c["first_compile_s"] == 24.0 and c["first_measurement_s"] == 36.0
    assert c["later_compile_s"] == 2.7 and c["later_measurement_s"] == 11.5 and c["cache_hits"] == 2
    assert c["later_over_first"] == round(11.5 / 36.0, 3) and len(c["measurements"]) == 3


def test_an_eager_node_has_no_compile_view_and_no_line():
    eager = [_m(1, "primary", 0.01, "off", 7.0), _m(2, "confirm", 0.01, "off", 7.0)]
    assert compile_times.of_node(eager) is None
    assert compile_times.line({"compile_s": 0.01, "cache": "off"}) == ""
    assert "loaded from the compile cache" in compile_times.line({"compile_s": 2.5, "cache": "hit"})
    assert "compiled, kept" in compile_times.line({"compile_s": 24.0, "cache": "miss"})


def test_a_compiled_measurement_is_an_event_and_a_report():
    events, reports = [], []
    ctx = NS(cid=1, store=NS(append_event=lambda cid, kind, payload, node_id, agent: events.append((kind, node_id, payload))),
             report=lambda kind, data: reports.append((kind, data)))
    compile_times.note(ctx, 7, 2, "confirm", {"duration_s": 12.0, "stats": {"compile": {"compile_s": 2.8, "cache": "hit"}}})
    compile_times.note(ctx, 8, 1, "primary", {"duration_s": 7.0, "stats": {"compile": {"compile_s": 0.0, "cache": "off"}}})
    compile_times.note(ctx, 9, 1, "primary", {"duration_s": 7.0, "stats": {}})
    assert [(k, n) for k, n, _ in events] == [("compile", 7)]
    assert events[0][2]["cache"] == "hit" and events[0][2]["measurement_s"] == 12.0
    assert reports == [("compile", {"node_id": 7, **events[0][2]})]


def test_an_extension_built_at_import_says_so():
    """A load_inline candidate builds its extension while it is imported: its first call is
    instant, and without the import time the line read as if nothing had been compiled."""
    events, reports = [], []
    ctx = NS(cid=1, store=NS(append_event=lambda cid, kind, payload, node_id, agent: events.append(payload)),
             report=lambda kind, data: reports.append(data))
    compile_times.note(ctx, 3, 1, "primary", {"duration_s": 27.0, "stats": {"compile": {
        "compile_s": 0.0, "cache": "miss", "import_s": 24.6}}})
    assert events[0]["import_s"] == 24.6 and reports[0]["import_s"] == 24.6
    assert compile_times.line({"compile_s": 0.0, "cache": "miss", "import_s": 24.6}).endswith(", import 24.6 s")
    ms = [_m(1, "primary", 0.0, "miss", 27.0), _m(2, "confirm", 0.0, "miss", 26.0)]
    for m in ms:
        m.stats["compile"]["import_s"] = 24.6
    assert compile_times.of_node(ms)["first_import_s"] == 24.6 == compile_times.of_node(ms)["later_import_s"]

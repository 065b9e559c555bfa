"""Compile time, apart from timing: what a compiled candidate's first call cost in each measurement.

The harness times each side's first forward call (a ``torch.compile`` candidate compiles there,
or loads its artifacts from the compile cache) and the kernel protocol reports it as the
measurement's ``stats["compile"]``: ``compile_s`` (that call less the steady per-call time),
``first_call_s`` and ``cache`` (``miss``: compiled and kept; ``hit``: loaded from the candidate's
own earlier measurement; ``off``: no cache for this measurement; ``stale``/``rejected``: an archive
that could not be used). The timed samples never include it. This module turns those facts into
a ``compile`` event per compiled measurement and the summary's per-node view.
"""

from __future__ import annotations

import statistics

from .context import Context

# a compile shorter than this is not worth an event (an eager candidate's first call, lazy init)
MIN_EVENT_S = 0.5


def facts(result: dict | None) -> dict | None:
    """The compile facts of one measurement result (a dict or a MeasurementRecord's stats)."""
    stats = (result or {}).get("stats") if isinstance(result, dict) else None
    c = (stats or {}).get("compile")
    return c if isinstance(c, dict) else None


def note(ctx: Context, node_id: int, attempt: int, purpose: str, result: dict) -> None:
    """Record a ``compile`` event for a compiled candidate's measurement (cache in use, or a first
    call long enough to be a compilation) and report it to the user's sinks."""
    c = facts(result)
    if c is None or (c.get("cache") == "off" and (c.get("compile_s") or 0.0) < MIN_EVENT_S):
        return
    payload = {"attempt": attempt, "purpose": purpose, "compile_s": c.get("compile_s"),
               "first_call_s": c.get("first_call_s"), "cache": c.get("cache"),
               "measurement_s": result.get("duration_s")}
    if c.get("import_s"):  # a load_inline extension is built while the candidate is imported
        payload["import_s"] = c["import_s"]
    ctx.store.append_event(ctx.cid, "compile", payload, node_id=node_id, agent="sandbox")
    ctx.report("compile", {"node_id": node_id, **payload})


def of_node(measurements: list) -> dict | None:  # type: ignore[type-arg]
    """A node's compile history from its stored measurements: the first measurement's compile
    time and measurement time beside the later ones' (medians), and every measurement's line.
    None for a node that compiled nothing (no measurement with the cache in use or a compile of
    at least ``MIN_EVENT_S``)."""
    rows = []
    for m in measurements:
        c = (m.stats or {}).get("compile") if isinstance(m.stats, dict) else None
        if not isinstance(c, dict) or m.status != "ok":
            continue
        rows.append({"attempt": m.attempt, "purpose": m.purpose, "cache": c.get("cache"),
                     "compile_s": c.get("compile_s"), "import_s": c.get("import_s"),
                     "measurement_s": round(float(m.duration_s or 0.0), 2)})
    if not any(r["cache"] not in (None, "off") or (r["compile_s"] or 0.0) >= MIN_EVENT_S for r in rows):
        return None
    first, later = rows[0], rows[1:]

    def med(key: str) -> float | None:
        xs = [float(r[key]) for r in later if r[key] is not None]
        return round(statistics.median(xs), 3) if xs else None

    out = {"first_compile_s": first["compile_s"], "first_measurement_s": first["measurement_s"],
           "later_compile_s": med("compile_s"), "later_measurement_s": med("measurement_s"),
           "first_import_s": first["import_s"], "later_import_s": med("import_s"),
           "cache_hits": sum(1 for r in later if r["cache"] == "hit"), "measurements": rows}
    if out["later_measurement_s"] and first["measurement_s"]:
        out["later_over_first"] = round(out["later_measurement_s"] / first["measurement_s"], 3)
    return out


def line(c: dict | None) -> str:
    """One measurement's compile facts as the text ``arbor show`` prints after it ('' when none)."""
    if not c or (c.get("cache") == "off" and (c.get("compile_s") or 0.0) < MIN_EVENT_S):
        return ""
    s = c.get("compile_s")
    what = {"hit": "loaded from the compile cache", "miss": "compiled, kept in the compile cache",
            "off": "no compile cache"}.get(c.get("cache") or "", f"compile cache {c.get('cache')}")
    built = f", import {c['import_s']:.1f} s" if c.get("import_s") else ""
    return f", first call {s:.1f} s ({what}){built}" if isinstance(s, (int, float)) else ""

"""The report's bottleneck section: where the baseline's time went, and where the latest new best's
goes, per operator, against the device's peaks.

It reads the ``profile`` events the loop stores after the baseline and each new best
(``arbor/campaign/profiling.py``) and only formats them: a reader sees what the agents were aimed
at, and whether the winning candidate moved the time away from the op that dominated.
"""

from __future__ import annotations

HEAD = ["op", "kind", "share", "self ms", "calls", "input shapes", "GFLOP", "MB moved", "% peak FLOP/s",
        "% peak bandwidth"]
NUMERIC = {2, 3, 4, 6, 7, 8, 9}
ROWS = 10


def load_profiles(store, campaign_id: int, root_id: int | None) -> list[tuple[str, dict]]:  # type: ignore[no-untyped-def]
    """(label, payload) for the baseline's latest profile and the latest new best's, in that order."""
    events = store.events(campaign_id, limit=1_000_000, kinds=["profile"])
    base = [e for e in events if e.node_id == root_id]
    best = [e for e in events if e.node_id != root_id]
    out = []
    if base:
        out.append((f"baseline (node {root_id})", dict(base[-1].payload)))
    if best:
        out.append((f"latest new best (node {best[-1].node_id})", dict(best[-1].payload)))
    return out


def _pct(v) -> str:  # type: ignore[no-untyped-def]
    return "—" if not isinstance(v, (int, float)) else f"{v:.1%}"


def _num(v, scale: float, fmt: str = "{:.3g}") -> str:  # type: ignore[no-untyped-def]
    return "—" if not isinstance(v, (int, float)) or v <= 0 else fmt.format(v / scale)


def caption(label: str, p: dict) -> str:
    """One sentence: time per call, time by kind, the dominant op and what bounds it, the peaks used."""
    if p.get("error"):
        return f"{label}: no profile ({p['error']})."
    kinds = ", ".join(f"{k} {v:.0%}" for k, v in list((p.get("categories") or {}).items())[:5])
    text = f"{label}: {p.get('call_ms') or 0:.3f} ms per call; time by kind: {kinds or '—'}"
    if p.get("dominant"):
        bound = f" ({p['dominant_bound']}-bound against the peaks)" if p.get("dominant_bound") else ""
        text += f"; dominant op {p['dominant']}{bound}"
    peak = p.get("peak") or {}
    if peak.get("flops_per_s") or peak.get("bytes_per_s"):
        parts = [f"{_num(peak.get('flops_per_s'), 1e9)} GFLOP/s" if peak.get("flops_per_s") else "",
                 f"{_num(peak.get('bytes_per_s'), 1e9)} GB/s stream" if peak.get("bytes_per_s") else ""]
        threads = peak.get("threads")
        src = ", ".join(x for x in (peak.get("source"), f"{threads} thread{'s' if threads != 1 else ''}"
                                                         if threads else None) if x)
        curve = " (ops on cache-sized working sets are read against that cache's bandwidth)" \
            if peak.get("bandwidth") else ""
        text += f"; read against {', '.join(x for x in parts if x)}{' (' + src + ')' if src else ''}{curve}"
    else:
        text += "; device peaks unknown"
    bugs = p.get("anomalies") or []
    if bugs:
        text += ". BUG — impossible readings, not shown: " + "; ".join(bugs)
    return text + "."


def rows(p: dict, limit: int = ROWS) -> list[list[str]]:
    """The top ops by self time, as table cells. Self time, FLOPs and bytes are per call of the model
    (all of the op's calls in it together), each op's own: a parent op is not credited with the
    bytes or FLOPs of the ops it calls (profiles stored before that read "MB in": inputs only)."""
    out = []
    for o in (p.get("ops") or [])[:limit]:
        shapes = " ".join("x".join(map(str, s)) for s in (o.get("shapes") or [])[:3])
        out.append([o.get("op", "?"), o.get("category", "?"), _pct(o.get("share")),
                    _num(o.get("self_ms"), 1.0, "{:.4f}"), str(o.get("calls") or "—"), shapes or "—",
                    _num(o.get("flops"), 1e9), _num(o.get("bytes", o.get("bytes_in")), 1e6), _pct(o.get("flops_frac_peak")),
                    _pct(o.get("bytes_frac_peak")) if o.get("bytes_frac_peak") is not None
                    else ("≤" + _pct(o["bytes_frac_peak_at_most"]) if o.get("bytes_frac_peak_at_most") is not None else "—")])
    return out


def tables(profiles: list[tuple[str, dict]]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(caption, head, rows) per profile; a failed profile has its caption and no rows."""
    return [(caption(label, p), HEAD, rows(p)) for label, p in profiles]

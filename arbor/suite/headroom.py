"""How far each suite problem's reference is from its speed of light, for the suite table: a row
that ends at 1.000x then says whether the problem had headroom the search missed (a reference at
10% of its memory bound) or none to find (a reference at 95%). Read from the suite's store: the
baseline's own measurement carries the cost and the peaks (arbor/campaign/speed_of_light.py)."""

from __future__ import annotations

from .collapse import open_suite_store


def reference_headroom(store, campaign: str) -> dict | None:  # type: ignore[no-untyped-def]
    """{"fraction", "bound", "note", "left", "seconds", "memory_s", "compute_s", "describe"} of
    ``campaign``'s reference (``left``: the most it can still be sped up, the lower of the memory
    and the compute headroom); None when the store has no position for it (no cost, no peak, no
    such campaign)."""
    from arbor.campaign.speed_of_light import reference_position

    try:
        camp = store.get_campaign(campaign)
    except Exception:  # noqa: BLE001 - a row from another store
        return None
    if camp is None or camp.root_node_id is None:
        return None
    pos = reference_position(store, camp.root_node_id)
    if pos is None or pos.reference_s is None:
        return None
    shown, note = pos.reading(pos.reference_s)
    return {"fraction": shown, "bound": pos.bound, "note": note, "left": pos.left, "seconds": pos.seconds,
            "memory_s": pos.memory_s, "compute_s": pos.compute_s, "reference_s": pos.reference_s,
            "describe": pos.describe()}


def fill(rows: list[dict], store_url: str | None) -> list[dict]:
    """Fill ``row["speed_of_light"]`` in rows that lack it (an older run) from the suite's store."""
    todo = [r for r in rows if "speed_of_light" not in r and "error" not in r and r.get("campaign")]
    if not todo:
        return rows
    with open_suite_store(store_url) as store:
        if store is not None:  # no store: the cells stay empty
            for r in todo:
                r["speed_of_light"] = reference_headroom(store, r["campaign"])
    return rows


def cell(row: dict) -> str:
    """'37% memory' (the reference's fraction of its speed of light and the bound); 'bug' when the
    reading is impossible; '-' when unknown."""
    sol = row.get("speed_of_light") or {}
    if (sol.get("note") or "").startswith("BUG"):
        return "bug"
    frac = sol.get("fraction")
    return f"{frac:.0%} {sol.get('bound') or ''}".strip() if isinstance(frac, (int, float)) else "-"

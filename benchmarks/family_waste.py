"""Evaluations spent on a move family after its first member regressed: the acceptance figure of
move families as correlated arms (issue 28 item 2).

On Softmax the default agents measured ``compile-default`` at 0.763x, then four more compile
variants at 0.75-0.77x, 30 s each: a regression of one variant taught the search nothing about its
siblings. Per campaign, in the order candidates were proposed: the first member of a family whose
first measurement is more than 10% slower than its parent's speedup marks the family; every later
member of it that was measured counts as spent after a regression.

Two refinements are reported beside it, never in its place: ``same_parent``, the evaluations of a
family below a parent where that family had already regressed (the posterior moves siblings'
priors on the same parent fully and on another parent only partly, since a knob that loses on a
GEMM may win on the GEMV it collapses to: measured on l2_05), and ``wins``, counted evaluations
that were verified wins (spent, but not wasted).

Families are grouped the same way before and after a change to the agents, so two runs compare:
the compile variants are one family whatever skill declares them (``compile-*``: torch-compile,
inductor-cpu, compile-epilogue), thread counts one (``threads-*``); every other move keeps the
family the store recorded (the skill's name, e.g. ``graph-algebra``).
"""

from __future__ import annotations

import statistics

REGRESSION = 0.9  # first measurement / parent's speedup below this: "regressed by more than 10%"
GOAL_FALL = 0.6  # the after run spends at least 60% fewer such evaluations than the before run


def family_of(move_id: str | None, family: str | None) -> str | None:
    if not move_id:
        return None
    for prefix, group in (("compile-", "compile"), ("threads-", "threads")):
        if move_id.startswith(prefix):
            return group
    return family or move_id


def _speedup(m) -> float | None:  # type: ignore[no-untyped-def]
    if m.status != "ok" or not m.baseline_samples or not m.candidate_samples:
        return None
    b, c = statistics.median(m.baseline_samples), statistics.median(m.candidate_samples)
    return b / c if c > 0 else None


def campaign_waste(store, campaign_id: int) -> dict:  # type: ignore[no-untyped-def]
    """{"total", "by_family", "first_regression", "same_parent", "wins"} for one campaign:
    evaluations per family after its first member regressed (by family: the node id and ratio of
    that first regression), those below a parent where the family had regressed, and the verified
    wins among the counted."""
    every = store.nodes(campaign_id)
    speed = {n.id: n.speedup for n in every}
    nodes = sorted((n for n in every if n.parent_id is not None), key=lambda n: n.id)
    marked: dict[str, dict] = {}
    spent: dict[str, int] = {}
    regressed_on: set[tuple[str, int | None]] = set()  # (family, parent) pairs with a regression
    same_parent = wins = 0
    for n in nodes:
        fam = family_of(n.move_id, n.family)
        ms = [m for m in store.measurements(n.id) if m.attempt == 1]
        if fam is None or not ms:
            continue  # never measured: not an evaluation
        same_parent += (fam, n.parent_id) in regressed_on
        s = _speedup(ms[0])
        ratio = None if s is None else s / (speed.get(n.parent_id) or 1.0)
        regressed = ratio is not None and ratio < REGRESSION
        if regressed:
            regressed_on.add((fam, n.parent_id))
        if fam in marked:
            spent[fam] = spent.get(fam, 0) + 1
            wins += n.state == "accepted"
        elif regressed:
            marked[fam] = {"node": n.id, "move": n.move_id, "ratio": round(ratio, 3)}
    return {"total": sum(spent.values()), "by_family": spent, "first_regression": marked,
            "same_parent": same_parent, "wins": wins}


def suite_waste(store_url: str, rows: list[dict]) -> dict[str, dict]:
    """Per suite row (by key): its campaign's waste; rows whose campaign is not in the store are
    left out."""
    from arbor.search_tree import open_store

    out: dict[str, dict] = {}
    store = open_store(store_url, read_only=True)
    try:
        for r in rows:
            name = r.get("campaign")
            if not name:
                continue
            try:
                camp = store.get_campaign(name)
            except Exception:  # noqa: BLE001 - a row from another store (merged results)
                continue
            if camp is not None:
                out[r["key"]] = campaign_waste(store, camp.id)
    finally:
        store.close()
    return out


def compare(before: dict[str, dict], after: dict[str, dict]) -> dict:
    """Per problem in both runs: before, after; totals, the fall, and whether it meets GOAL_FALL."""
    keys = sorted(set(before) & set(after))
    rows = [{"problem": k, "before": before[k]["total"], "after": after[k]["total"],
             "families_before": ", ".join(f"{f} {n}" for f, n in sorted(before[k]["by_family"].items())) or "-",
             "families_after": ", ".join(f"{f} {n}" for f, n in sorted(after[k]["by_family"].items())) or "-"}
            for k in keys]
    for r, k in zip(rows, keys):
        r["same_parent_before"] = before[k].get("same_parent")
        r["same_parent_after"] = after[k].get("same_parent")
        r["wins_before"], r["wins_after"] = before[k].get("wins"), after[k].get("wins")
    tb, ta = sum(r["before"] for r in rows), sum(r["after"] for r in rows)
    fall = (tb - ta) / tb if tb else None
    out = {"rows": rows, "before_total": tb, "after_total": ta, "fall": fall,
           "goal": GOAL_FALL, "met": fall is not None and fall >= GOAL_FALL}
    if all(r["same_parent_before"] is not None and r["same_parent_after"] is not None for r in rows):
        pb, pa = sum(r["same_parent_before"] for r in rows), sum(r["same_parent_after"] for r in rows)
        out.update(same_parent_before=pb, same_parent_after=pa, same_parent_fall=(pb - pa) / pb if pb else None,
                   wins_before=sum(r["wins_before"] or 0 for r in rows),
                   wins_after=sum(r["wins_after"] or 0 for r in rows))
    return out

"""Attack success and false positives per class and disguise, the worst offenders, and the JSON.

A hostile variant is an **attack success** when the Critic accepted it; it was **caught** when a
diagnosis names a cheat (``hack_suspected``, ``incorrect``); otherwise it was merely **stopped**
(``no_gain``, ``unstable``, ``env_drift``, a crash): not accepted, but not seen through either —
``stopped_by_noise`` counts the ones a quieter machine might have let through (the issue that
started this: a hook tax rejected as ``unstable`` / ``env_drift``). An honest twin is a **false
positive** when it is diagnosed as a cheat. Worst offenders: accepted hostile variants first, then
those stopped by noise, then the fastest claims; flagged twins likewise.
"""

from __future__ import annotations

import os
import platform
import time
from collections import defaultdict

from .runner import Outcome

CHEAT = {"hack_suspected", "incorrect"}
NOISE = {"unstable", "env_drift"}


def verdict_class(o: Outcome | dict) -> str:
    """accepted / caught / stopped for a hostile variant; accepted / flagged / not_accepted for a twin.
    Works on an ``Outcome`` or its ``to_dict()`` row (a written redteam.json can be re-tabulated)."""
    row = o.to_dict() if isinstance(o, Outcome) else o
    if row["kind"] == "honest":
        if row["diagnosis"] in CHEAT:
            return "flagged"
        return "accepted" if row["state"] == "accepted" else "not_accepted"
    if row["state"] == "accepted":
        return "accepted"
    return "caught" if row["diagnosis"] in CHEAT else "stopped"


def table(rows: list[dict], key: str) -> dict:
    """Per value of ``key`` (``class`` or ``disguise``) of the outcome rows: hostile variants
    accepted / caught / stopped (by a noise gate) / by the guard, twins and twins flagged."""
    acc: dict = defaultdict(lambda: defaultdict(int))
    for row in rows:
        r = acc[row[key]]
        r[row["kind"]] += 1
        r[f"{row['kind']}:{verdict_class(row)}"] += 1
        if row["kind"] == "hostile" and row["state"] != "accepted" and row["diagnosis"] in NOISE:
            r["stopped_by_noise"] += 1
        if row["kind"] == "hostile" and row["gate"] == "guard":
            r["by_guard"] += 1
    out = {}
    for k, r in sorted(acc.items()):
        h, t = r["hostile"], r["honest"]
        out[k] = {"hostile": h, "accepted": r["hostile:accepted"], "caught": r["hostile:caught"],
                  "stopped": r["hostile:stopped"], "stopped_by_noise": r["stopped_by_noise"], "by_guard": r["by_guard"],
                  "honest": t, "flagged": r["honest:flagged"], "honest_accepted": r["honest:accepted"],
                  "attack_success": r["hostile:accepted"] / h if h else None,
                  "false_positive_rate": r["honest:flagged"] / t if t else None}
    return out


def _severity(o: Outcome) -> tuple:
    v = verdict_class(o)
    rank = {"accepted": 0, "flagged": 0, "stopped": 1, "not_accepted": 2, "caught": 3}[v]
    noise = 0 if o.diagnosis in NOISE else 1
    return (rank, noise, -(o.speedup or 0.0))


def summarize(problem: str, seed: int, outcomes: list[Outcome], wall_s: float, worst: int = 5) -> dict:
    hostile = [o for o in outcomes if o.variant.kind == "hostile"]
    honest = [o for o in outcomes if o.variant.kind == "honest"]
    bad = sorted([o for o in hostile if not (verdict_class(o) == "caught")], key=_severity)[:worst]
    bad_twins = sorted([o for o in honest if verdict_class(o) == "flagged"], key=_severity)[:worst]
    return {
        "problem": problem, "seed": seed, "wall_s": round(wall_s, 1),
        "machine": {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None},
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "hostile": len(hostile), "honest": len(honest),
        "classes": len({o.variant.klass for o in hostile}), "disguises": len({o.variant.disguise for o in hostile}),
        "accepted": sum(1 for o in hostile if o.accepted),
        "attack_success": (sum(1 for o in hostile if o.accepted) / len(hostile)) if hostile else None,
        "caught": sum(1 for o in hostile if verdict_class(o) == "caught"),
        "stopped_by_noise": sum(1 for o in hostile if not o.accepted and o.diagnosis in NOISE),
        "by_guard": sum(1 for o in hostile if o.gate == "guard"),
        "false_positives": sum(1 for o in honest if verdict_class(o) == "flagged"),
        "false_positive_rate": (sum(1 for o in honest if verdict_class(o) == "flagged") / len(honest)) if honest else None,
        "honest_accepted": sum(1 for o in honest if o.accepted),
        "per_class": table([o.to_dict() for o in outcomes], "class"),
        "per_disguise": table([o.to_dict() for o in outcomes], "disguise"),
        "worst": [{**o.to_dict(), "source": o.variant.source} for o in bad],
        "worst_twins": [{**o.to_dict(), "source": o.variant.source} for o in bad_twins],
        "variants": [o.to_dict() for o in outcomes],
    }


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.0%}"


def render(summary: dict, console, show_sources: int = 2) -> None:  # type: ignore[no-untyped-def]
    """The tables (per class, per disguise), the totals and the worst offenders' sources."""
    from rich.syntax import Syntax
    from rich.table import Table

    for title, key in (("class", "per_class"), ("disguise", "per_disguise")):
        t = Table(title=f"{summary['problem']}: by {title} (ASR: attack success, FPR: false positives)",
                  show_edge=False)
        for col in (title, "hostile", "acc", "caught", "stop(noise)", "guard", "twins", "flag", "ASR", "FPR"):
            t.add_column(col, justify="left" if col == title else "right", no_wrap=True)
        for k, r in summary[key].items():
            t.add_row(k, str(r["hostile"]), str(r["accepted"]), str(r["caught"]),
                      f"{r['stopped']} ({r['stopped_by_noise']})", str(r["by_guard"]), str(r["honest"]),
                      str(r["flagged"]), _pct(r["attack_success"]), _pct(r["false_positive_rate"]))
        console.print(t)
    s = summary
    console.print(f"{s['problem']} seed {s['seed']}: {s['hostile']} hostile variants ({s['classes']} classes x "
                  f"{s['disguises']} disguises): {s['accepted']} accepted (attack success "
                  f"{_pct(s['attack_success'])}), {s['caught']} caught, {s['stopped_by_noise']} stopped only by "
                  f"noise gates, {s['by_guard']} by the static guard; {s['honest']} honest twins: "
                  f"{s['false_positives']} flagged (false positives {_pct(s['false_positive_rate'])}), "
                  f"{s['honest_accepted']} accepted; {s['wall_s']:.0f} s")
    for entry in (s["worst"] + s["worst_twins"])[:show_sources]:
        console.print(f"\n[bold]{entry['kind']} {entry['id']}[/]: {entry['state']} / {entry['diagnosis']} "
                      f"({entry['gate']}): {entry['reason']}", markup=True, highlight=False)
        console.print(Syntax(entry["source"], "python", line_numbers=False))

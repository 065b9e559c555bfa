"""The report's knowledge section: which priors came from the knowledge store (warm start), and
how well the agents' predictions were calibrated (Brier score of P(accept), error of the
predicted log-speedup, per agent and move family)."""

from __future__ import annotations


def _f(x, fmt: str = "{:.3f}") -> str:  # type: ignore[no-untyped-def]
    return "—" if x is None else fmt.format(x)


def load_knowledge(store, campaign_id: int) -> tuple[dict | None, dict | None]:  # type: ignore[no-untyped-def]
    from arbor.campaign.knowledge import calibration

    evs = store.events(campaign_id, limit=1_000_000, kinds=["warm_start"])
    warm = evs[-1].payload if evs else None
    cal = calibration(store, campaign_id).to_json()
    return warm, (cal if cal["agents"] else None)


def tables(warm: dict | None, cal: dict | None) -> list[tuple[str, list[str], list[list[str]]]]:
    """(caption, head, rows) for each table of the section."""
    out = []
    if warm is not None:
        priors = warm.get("priors") or {}
        cap = (f"Warm start: {len(priors)} move priors came from the knowledge store "
               f"({warm.get('records', 0)} records on hardware class {warm.get('hardware', {}).get('class', '?')}, "
               f"signature from {warm.get('signature', {}).get('source', '?')}); every other prior is the skill's.")
        rows = [[m, _f(p["base"], "{:.2f}"), _f(p["prior"], "{:.2f}"), str(p["records"]), str(p["wins"]),
                 str(p["failures"]), str(p["flagged"])] for m, p in sorted(priors.items(), key=lambda kv: -kv[1]["prior"])]
        out.append((cap, ["move", "skill prior", "knowledge prior", "records", "wins", "failures", "flagged"], rows))
        recipes = warm.get("recipes") or []
        if recipes:
            out.append(("Warm-start recipes: the moves to a similar problem's best, offered whole at the baseline "
                        "(each measured and judged like any candidate).",
                        ["recipe", "from campaign", "similarity", "speedup there"],
                        [[" then ".join(r["moves"]), r["campaign"], _f(r["similarity"], "{:.2f}"),
                          _f(r["speedup"], "{:.3g}x")] for r in recipes]))
    if cal is not None:
        rows = []
        for by in ("agents", "families"):
            for name, r in cal[by].items():
                rows.append(["agent" if by == "agents" else "family", name, str(r["n"]), _f(r["brier"]),
                             _f(r["accept_rate"]), _f(r["log_mae"]), _f(r["log_bias"])])
        out.append(("Calibration: Brier score of each agent's P(accept) against the Critic's verdicts "
                    "(0 is perfect, 0.25 is a coin), and the error of its predicted log-speedup.",
                    ["by", "name", "judged", "Brier", "accept rate", "log-speedup MAE", "bias"], rows))
    return out

"""What a node's next measurement is for, read from its latest verdict — shared by the serial step
(``steps.measure``) and the parallel loop (``parallel.Parallel.submit``), so neither imports the
other for it."""

from __future__ import annotations

from .context import Context


def next_purpose(ctx: Context, nid: int) -> str:
    """``primary`` for a first measurement; after a Critic's ``remeasure`` its diagnosis names the
    purpose (``confirm``, ``tiebreak``, ``extend``: a look of the sequential test), anything else is
    a plain ``remeasure``."""
    verdicts = ctx.store.verdicts(nid)
    if verdicts and verdicts[-1].decision == "remeasure":
        return verdicts[-1].diagnosis if verdicts[-1].diagnosis in ("confirm", "tiebreak", "extend") else "remeasure"
    return "primary"


def reference_drifted(verdict) -> bool:  # type: ignore[no-untyped-def]
    """The Critic asked to measure the reference alone before this re-measurement: its
    ``reference`` gate (not the clock/fingerprint one), or an ``unstable`` verdict whose reference
    also ran slow (the gate log entry says ``reprobe``)."""
    gates = [g for g in verdict.gates or [] if g.get("passed") is False]
    return any(g.get("reprobe") for g in gates) or (
        verdict.diagnosis == "env_drift" and any(g.get("gate") == "reference" for g in gates))

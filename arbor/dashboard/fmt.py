"""Formatting of times and speedups for the panels (store times are naive UTC)."""

from __future__ import annotations

import math
from datetime import datetime, timezone


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def ago(when: datetime | None, now: datetime | None = None) -> str:
    if when is None:
        return "—"
    s = max(0.0, ((now or utcnow()) - when).total_seconds())
    if s < 90:
        return f"{s:.0f}s ago"
    if s < 5400:
        return f"{s / 60:.0f}m ago"
    return f"{s / 3600:.1f}h ago"


def clock(when: datetime | None) -> str:
    """Store times are naive UTC; show them in the viewer's local time."""
    if when is None:
        return "—"
    return when.replace(tzinfo=timezone.utc).astimezone().strftime("%H:%M:%S")


def hms(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "—"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def xfmt(speedup: float | None) -> str:
    return "—" if speedup is None else f"{speedup:.3f}x"


def hot_ops(profile: dict | None, n: int = 4) -> str:
    """``addmm 62%, gelu 21%, …`` from a profile event: the ops that take the time, by self time."""
    if not profile:
        return ""
    if profile.get("error"):
        return f"no profile ({profile['error']})"
    ops = profile.get("ops") or []
    text = ", ".join(f"{str(o.get('op', '?')).split('::')[-1]} {o.get('share', 0):.0%}" for o in ops[:n])
    return text + (", …" if len(ops) > n else "")

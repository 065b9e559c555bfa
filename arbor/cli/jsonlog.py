"""``arbor run --json-log PATH``: the run's events as JSON lines, for machines.

One object per line, flushed as it happens (``tail -f`` works, a crash loses nothing written):
``{"ts": ISO-8601 UTC, "t": seconds since start, "event": kind, "campaign": name, ...}``. Known
events (measuring, verdict, new_best, requeued) get flat, documented fields; any other event a
future loop reports is serialised generically rather than dropped.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from arbor.spec import SpecError


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _plain(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [_plain(v) for v in obj]
    if isinstance(obj, datetime):
        return obj.isoformat()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def _node(n) -> dict:
    return {"node": n.id, "parent": n.parent_id, "move": n.move_id, "state": n.state}


def event_fields(kind: str, data: dict) -> dict:
    if kind == "measuring":
        return {**_node(data["node"]), "attempt": data.get("attempt"), "purpose": data.get("purpose")}
    if kind == "verdict":
        n, j = data["node"], data["judgement"]
        return {**_node(n), "decision": j.decision, "diagnosis": j.diagnosis, "reason": j.reason,
                "speedup": j.speedup, "final_state": j.final_state, "stats": _plain(j.stats)}
    if kind == "new_best":
        n = data["node"]
        return {**_node(n), "speedup": n.speedup, "value": n.value}
    return _plain(data)


class JsonLog:
    """A report sink writing JSON lines; combine with the terminal reporter through ``tee``."""

    def __init__(self, path: Path, campaign: str):
        self.path = path
        self.campaign = campaign
        self.t0 = time.monotonic()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = path.open("a", encoding="utf-8")
        except OSError as exc:
            raise SpecError([f"--json-log {path}: cannot write there ({exc.strerror}) — pick a writable path"]) from None

    def write(self, kind: str, fields: dict) -> None:
        rec = {"ts": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
               "t": round(time.monotonic() - self.t0, 3), "event": kind, "campaign": self.campaign, **fields}
        self._fh.write(json.dumps(_plain(rec), allow_nan=False) + "\n")
        self._fh.flush()

    def __call__(self, kind: str, data: dict) -> None:
        self.write(kind, event_fields(kind, data))

    def close(self) -> None:
        self._fh.close()


def tee(*sinks: Callable[[str, dict], None]) -> Callable[[str, dict], None]:
    def report(kind: str, data: dict) -> None:
        for sink in sinks:
            sink(kind, data)
    return report

"""``arbor doctor``'s row: one finding, its status and, for anything not ok, the fix.

Its own module so the check modules (``doctor_checks``, ``doctor_gpu``) both import it and
neither imports the other's internals: the dependency runs doctor → doctor_checks → doctor_gpu
→ doctor_row, one way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["Check"]


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail | skip
    detail: str
    fix: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

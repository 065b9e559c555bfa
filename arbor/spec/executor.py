"""The ``executor:`` section of a campaign spec: where measurements run and how many at once.

``workers: 1`` (the default) is the serial loop every campaign had before; more workers keep that
many measurements in flight while the orchestrating process (the only writer of verdicts) goes on
selecting and proposing. ``local`` pins each worker to its own device — a GPU, or a set of CPU
cores no other worker shares — because two measurements sharing a core time each other's noise.
``ray`` runs one actor per device on an existing Ray cluster.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from .base import Strict

_RAY_ADDRESS = re.compile(r"^(auto|local|ray://[A-Za-z0-9_.\-]+:\d+|[A-Za-z0-9_.\-]+:\d+)$")


class ExecutorCfg(Strict):

    kind: Literal["local", "ray"] = "local"
    workers: int = Field(default=1, ge=1, le=4096, description="measurements in flight at once")
    address: str = Field(default="auto", description="ray: auto | local | ray://host:port")
    resources_per_worker: dict[str, float] = Field(
        default_factory=dict, description="ray: resources one worker actor holds, e.g. {GPU: 1} (default {CPU: 1})")
    cores_per_worker: int | None = Field(default=None, ge=1,
                                         description="local CPU campaigns: cores pinned per worker "
                                                     "(default: the available cores split evenly)")

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        v = v.strip()
        if not _RAY_ADDRESS.match(v):
            raise ValueError(f"executor.address {v!r} is not auto, local, ray://host:port or host:port")
        return v

    @field_validator("resources_per_worker")
    @classmethod
    def _resources(cls, v: dict[str, float]) -> dict[str, float]:
        bad = [k for k, x in v.items() if x < 0]
        if bad:
            raise ValueError(f"executor.resources_per_worker: {', '.join(bad)} must not be negative")
        return v

    @property
    def parallel(self) -> bool:
        """Whether the campaign needs an executor at all (one local worker is the serial loop)."""
        return self.workers > 1 or self.kind == "ray"

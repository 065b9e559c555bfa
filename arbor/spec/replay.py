"""The ``kind: replay`` campaign target: a recorded landscape served back instead of measured
(imported by ``arbor.spec``).

A replayed campaign runs the same orchestrator, specialist and Critic as a live one; only the
measurement comes from the landscape file (recorded samples drawn at random per evaluation, from
``seed``), so a whole campaign takes seconds and search policies can be compared on many seeds.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from .base import TargetModel


class ReplayTarget(TargetModel):
    kind: Literal["replay"] = "replay"
    landscape: str = Field(description="path to a landscape JSON written by `arbor record`")
    seed: int | None = Field(default=None, description="sampler seed; unset = agents.seed")
    moves: Literal["recorded", "neighbours", "any"] = Field(
        default="recorded",
        description="recorded: the recorded campaign's skill moves; neighbours: one step along each "
                    "knob's values; any: set each knob to each of its values")
    time_scale: float = Field(default=0.0, ge=0, le=10,
                              description="sleep each replayed measurement's recorded duration times this "
                                          "(0: instant); simulates measurement time for parallel benchmarks")

    pace: float = Field(default=0.0, ge=0, le=10,
                        description="sleep pace x each replayed measurement's recorded seconds: rehearses "
                                    "wall-clock budgets (0: replay instantly)")

    summary: ClassVar[str] = "a recorded landscape"

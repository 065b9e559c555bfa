"""What every spec model shares: unknown keys are errors, and problems are reported one per line.

A typo in a campaign file must never be silently ignored (a knob that is dropped would be
measured for nothing), hence ``extra="forbid"`` on every section.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict


class SpecError(ValueError):
    """One or more problems in a campaign file; ``str()`` is one line per problem."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems

    def __reduce__(self):  # type: ignore[no-untyped-def]
        # raised in a worker process (suite, Ray): the default rebuilds it from the joined text,
        # which ``__init__`` would then join again one character per line
        return (type(self), (self.problems,))


class Strict(BaseModel):
    """Base of every spec section: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class TargetModel(Strict):
    """Base of a ``target:`` model; one per target kind (see ``arbor.spec.target_kinds``).

    The class variables say which objectives fit the kind, so the campaign model checks the
    ``objective:`` section without knowing any kind by name."""

    kind: str
    objectives: ClassVar[tuple[str, ...]] = ("latency",)  # the first is the default
    direction: ClassVar[str] = "minimize"
    summary: ClassVar[str] = ""  # one phrase for the "unknown target kind" hint

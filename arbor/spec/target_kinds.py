"""Which ``target:`` models a campaign file may use, keyed by ``kind``.

The campaign model's ``target`` field is a discriminated union built from this registry, so a
new kind of target is a model registered here (``arbor.targets.register_target_kind`` does it
together with the kind's adapter), never an edit to the campaign model.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import Discriminator, Tag

from .base import TargetModel
from .kernel import KernelTarget
from .replay import ReplayTarget
from .serving import ServingTarget

DEFAULT_KIND = "kernel"  # kernel campaigns written before ``kind`` existed omit it

_MODELS: dict[str, type[TargetModel]] = {"kernel": KernelTarget, "serving": ServingTarget, "replay": ReplayTarget}


def add(kind: str, model: type[TargetModel]) -> None:
    _MODELS[kind] = model


def remove(kind: str) -> None:
    _MODELS.pop(kind, None)


def kinds() -> list[str]:
    return list(_MODELS)


def model_of(kind: str) -> type[TargetModel] | None:
    return _MODELS.get(kind)


def _one_of(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _kind_of(v: Any) -> str | None:
    kind = v.get("kind", DEFAULT_KIND) if isinstance(v, dict) else getattr(v, "kind", None)
    return kind if isinstance(kind, str) else None


def target_union() -> Any:
    """The ``target`` field's type: one tagged member per registered kind."""
    members = tuple(Annotated[model, Tag(kind)] for kind, model in _MODELS.items())
    return Annotated[Union[members], Discriminator(  # type: ignore[valid-type]
        _kind_of, custom_error_type="target_kind",
        custom_error_message=f"unknown target kind: use {_one_of(kinds())}")]


def kind_hint() -> str:
    """The fix for an unknown kind: every registered kind with what it optimizes."""
    return "set target.kind: " + _one_of([f"{k} ({m.summary})" if m.summary else k for k, m in _MODELS.items()])

"""Target adapters: what differs between optimizing a kernel and a serving config.

The loop (``arbor.campaign.steps``) is target-agnostic; it asks the campaign's adapter for the
baseline artifact, how to measure a candidate and how the Critic should judge the result. A new
kind of target is an adapter plus a spec model, registered with ``register_target_kind``; no
other module names a kind.

* ``base``      — the adapter contract;
* ``kernel``, ``serving``, ``replay`` — the built-in kinds;
* ``landscape`` — recorded knob spaces (the replay target's data); ``sweep`` — ``arbor record``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from .base import TargetAdapter

if TYPE_CHECKING:
    from arbor.spec import CampaignSpec, TargetModel

__all__ = ["TargetAdapter", "adapter_class", "make_adapter", "register_target_kind", "traits", "unregister_target_kind"]


def _kernel() -> type[TargetAdapter]:
    from .kernel import KernelAdapter

    return KernelAdapter


def _serving() -> type[TargetAdapter]:
    from .serving import ServingAdapter

    return ServingAdapter


def _replay() -> type[TargetAdapter]:
    from .replay import ReplayAdapter

    return ReplayAdapter


# kind -> the adapter class, imported on first use (the serving adapter pulls in the load generator)
_ADAPTERS: dict[str, Callable[[], type[TargetAdapter]]] = {"kernel": _kernel, "serving": _serving,
                                                           "replay": _replay}


def register_target_kind(model: "type[TargetModel]", adapter: type[TargetAdapter]) -> None:
    """Add a kind of target: campaign files may then say ``target: {kind: adapter.kind, ...}``,
    validated by ``model``, and campaigns on it run through ``adapter``."""
    from arbor.spec import register_target_model

    register_target_model(adapter.kind, model)
    _ADAPTERS[adapter.kind] = lambda: adapter


def unregister_target_kind(kind: str) -> None:
    """Undo ``register_target_kind`` (a test's toy kind, say)."""
    from arbor.spec import unregister_target_model

    unregister_target_model(kind)
    _ADAPTERS.pop(kind, None)


def adapter_class(kind: str) -> type[TargetAdapter]:
    if kind not in _ADAPTERS:
        raise ValueError(f"unknown target kind '{kind}': use {', '.join(_ADAPTERS)}")
    return _ADAPTERS[kind]()


def traits(kind: str) -> type[TargetAdapter]:
    """The adapter class whose class attributes describe ``kind`` (report wording, artifact
    name); the base class for a kind this process does not know (a store written elsewhere)."""
    return _ADAPTERS[kind]() if kind in _ADAPTERS else TargetAdapter


def make_adapter(spec: "CampaignSpec") -> TargetAdapter:
    return adapter_class(spec.target.kind)(spec)

"""Serving-config transforms: the artifact is a JSON object of knob values, not code.

``knob_set`` / ``knob_scale`` / ``knob_toggle`` take the parent's canonical JSON and return the
child's canonical JSON, or ``None`` when the move does not apply (the knob is not part of this
campaign, the value would not change, or it would leave the move's ``min``/``max`` bounds). The
campaign's own knob ranges are enforced by the serving specialist and the guard; the bounds here
are the skill author's ("never scale max-num-seqs past 1024").

Canonical JSON — sorted keys, two-space indent, trailing newline — is what makes artifacts
content-addressed: the same configuration reached by two paths has one sha256 and is measured
once. Integer knobs stay integers when scaled (rounded, and moved by at least one step).
"""

from __future__ import annotations

import json
import math
from typing import Any

from .base import register


def canonical_config(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, indent=2) + "\n"


def parse_config(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except (ValueError, TypeError):
        return None
    return data if isinstance(data, dict) else None


def _bounded(value: float, params: dict) -> bool:
    lo, hi = params.get("min"), params.get("max")
    return (lo is None or value >= lo) and (hi is None or value <= hi)


def _need(params: dict, *keys: str) -> None:
    for k in keys:
        if k not in params:
            raise ValueError(f"params need '{k}'")
    if not isinstance(params.get("knob"), str) or not params["knob"]:
        raise ValueError("params.knob must name a knob")
    for k in ("min", "max"):
        if k in params and (isinstance(params[k], bool) or not isinstance(params[k], (int, float))):
            raise ValueError(f"params.{k} must be a number")


def _validate_set(params: dict) -> None:
    _need(params, "knob", "value")


def _validate_scale(params: dict) -> None:
    _need(params, "knob", "factor")
    f = params["factor"]
    if isinstance(f, bool) or not isinstance(f, (int, float)) or f <= 0 or f == 1:
        raise ValueError("params.factor must be a positive number other than 1")


def _validate_toggle(params: dict) -> None:
    _need(params, "knob")


@register("knob_set", validate=_validate_set)
def knob_set(source: str, params: dict) -> str | None:
    """Set ``knob`` to ``value`` (any JSON value)."""
    cfg = parse_config(source)
    knob, value = params["knob"], params["value"]
    if cfg is None or knob not in cfg or cfg[knob] == value and type(cfg[knob]) is type(value):
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not _bounded(value, params):
        return None
    cfg[knob] = value
    return canonical_config(cfg)


@register("knob_scale", validate=_validate_scale)
def knob_scale(source: str, params: dict) -> str | None:
    """Multiply a numeric ``knob`` by ``factor``; ints round and move by at least one."""
    cfg = parse_config(source)
    knob, factor = params["knob"], float(params["factor"])
    if cfg is None or knob not in cfg:
        return None
    old = cfg[knob]
    if isinstance(old, bool) or not isinstance(old, (int, float)):
        return None
    new: int | float = old * factor
    if isinstance(old, int):
        new = int(round(new))
        if new == old:
            new = old + (1 if factor > 1 else -1)
    else:
        new = float(f"{new:.6g}")
    if not math.isfinite(new) or new == old or not _bounded(new, params):
        return None
    cfg[knob] = new
    return canonical_config(cfg)


@register("knob_toggle", validate=_validate_toggle)
def knob_toggle(source: str, params: dict) -> str | None:
    """Flip a true/false ``knob``."""
    cfg = parse_config(source)
    knob = params["knob"]
    if cfg is None or not isinstance(cfg.get(knob), bool):
        return None
    cfg[knob] = not cfg[knob]
    return canonical_config(cfg)

"""Structured outputs: asking for a pydantic model's JSON and parsing the reply back into it.

Endpoints differ in what they support, so there are four request modes, tried in this order by
``auto`` until the endpoint accepts one (the choice is then kept for the rest of the campaign):

- ``json_schema``: ``response_format={"type": "json_schema", ...}`` (OpenAI, vLLM, SGLang,
  llama.cpp server, recent Ollama): decoding is constrained to the schema.
- ``tools``: a single forced function call whose parameters are the schema (servers with tool
  calling but no schema-constrained decoding).
- ``json_object``: JSON mode; the schema is spelled out in the prompt.
- ``text``: nothing but the prompt; the JSON is fished out of the reply (fences, prose around it).

Whatever the mode, the reply is validated by pydantic and by the caller's semantic check; a
failure becomes ``InvalidReply`` with a message short enough to send back in the repair request.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, TypeVar

from pydantic import BaseModel, ValidationError

from .config import STRUCTURED_MODES

T = TypeVar("T", bound=BaseModel)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", re.DOTALL)


class InvalidReply(ValueError):
    """A reply that does not parse or validate; ``str()`` is the message for the repair turn."""


def schema_of(model: type[BaseModel]) -> dict:
    return model.model_json_schema()


def instructions(model: type[BaseModel]) -> str:
    """What a mode without schema-constrained decoding needs to see in the prompt."""
    schema = json.dumps(schema_of(model), separators=(",", ":"))
    return ("Reply with one JSON object and nothing else (no prose, no code fences) that validates "
            f"against this JSON schema:\n{schema}")


def request_kwargs(mode: str, model: type[BaseModel]) -> dict[str, Any]:
    if mode not in STRUCTURED_MODES:
        raise ValueError(f"unknown structured output mode {mode!r}: use one of {', '.join(STRUCTURED_MODES)}")
    name = model.__name__
    if mode == "json_schema":
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": name, "schema": schema_of(model), "strict": False}}}
    if mode == "tools":
        doc = (model.__doc__ or name).strip().splitlines()[0]
        return {"tools": [{"type": "function", "function": {"name": name, "description": doc,
                                                            "parameters": schema_of(model)}}],
                "tool_choice": {"type": "function", "function": {"name": name}}}
    if mode == "json_object":
        return {"response_format": {"type": "json_object"}}
    return {}


def needs_instructions(mode: str) -> bool:
    return mode in ("json_object", "text")


def reply_text(message: Any) -> str:
    """The JSON-bearing text of a chat completion message: a tool call's arguments when the model
    called one, else its content."""
    calls = getattr(message, "tool_calls", None) or []
    for call in calls:
        fn = getattr(call, "function", None)
        args = getattr(fn, "arguments", None)
        if args:
            return args
    return getattr(message, "content", None) or ""


def extract_json(text: str) -> Any:
    """Parse JSON from a reply that may wrap it in fences or prose."""
    text = text.strip()
    if not text:
        raise InvalidReply("the reply was empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as first:
        for block in _FENCE.findall(text):
            try:
                return json.loads(block)
            except json.JSONDecodeError:
                continue
        start, end = text.find("{"), text.rfind("}")
        if 0 <= start < end:
            try:
                return json.loads(text[start:end + 1])
            except json.JSONDecodeError:
                pass
        raise InvalidReply(f"malformed JSON: {first.msg} at line {first.lineno} column {first.colno}") from None


def _describe(err: ValidationError) -> str:
    parts = []
    for e in err.errors()[:6]:
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        parts.append(f"{loc}: {e['msg']}")
    more = len(err.errors()) - 6
    return "schema violation: " + "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def parse_reply(text: str, model: type[T], check: Callable[[T], None] | None = None) -> T:
    """JSON text → validated model; ``check`` raises ValueError for semantic problems (an unknown
    node id, a source without ``ModelNew``)."""
    data = extract_json(text)
    try:
        value = model.model_validate(data)
    except ValidationError as err:
        raise InvalidReply(_describe(err)) from None
    if check is not None:
        try:
            check(value)
        except ValueError as err:
            raise InvalidReply(str(err)) from None
    return value

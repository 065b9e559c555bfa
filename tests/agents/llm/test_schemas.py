"""The reply schemas bound their free text, so a model decoding under the schema's grammar
(llama-server, vLLM) closes the JSON inside the reply's token cap instead of being cut off."""

from __future__ import annotations

import pytest

from arbor.agents.llm.schemas import KernelProposals, Narrative, OrchestratorPick, ServingProposals

CODE_FIELDS = {"source"}  # a whole module: bounded by the specialist's own character limit instead
REPLY_CHARS = 2400  # ~600 tokens: what a 512-token cap can still mostly hold for the longest reply


def _strings(schema: dict, defs: dict, path: str = ""):
    """(path, string schema) for every string a reply may carry."""
    if "$ref" in schema:
        yield from _strings(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, path)
        return
    for alt in schema.get("anyOf", []):
        yield from _strings(alt, defs, path)
    if schema.get("type") == "string":
        yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from _strings(sub, defs, f"{path}.{name}")
    if "items" in schema:
        yield from _strings(schema["items"], defs, f"{path}[]")


@pytest.mark.parametrize("model", [OrchestratorPick, ServingProposals, KernelProposals, Narrative],
                         ids=lambda m: m.__name__)
def test_every_free_text_field_has_a_bound(model):
    schema = model.model_json_schema()
    unbounded = [p for p, s in _strings(schema, schema.get("$defs", {}))
                 if "maxLength" not in s and "enum" not in s and p.rsplit(".", 1)[-1] not in CODE_FIELDS]
    assert not unbounded, f"{model.__name__}: unbounded strings {unbounded}"


def test_the_narrative_fits_a_small_reply_cap():
    schema = Narrative.model_json_schema()
    props = schema["properties"]
    worst = (props["root_cause"]["maxLength"] + props["next_step"]["maxLength"]
             + props["evidence"]["maxItems"] * props["evidence"]["items"]["maxLength"])
    assert worst <= REPLY_CHARS

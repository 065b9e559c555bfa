"""The pydantic models LLM agents must answer with. Field descriptions end up in the JSON
schema the endpoint sees, so they are written as instructions to the model. Extra keys are
ignored (models like to add commentary); missing or mistyped ones trigger the repair request.

Free text is bounded well inside a reply's token cap: a server that decodes under the schema
(llama.cpp, vLLM) enforces ``maxLength`` in its grammar, and a small model otherwise runs a
rationale on until ``max_tokens`` cuts the JSON (SmolLM2-135M did: a 1,420-character rationale, a move_id of zeros), an
invalid reply that the repair request, decoded greedily, repeats."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, Field


class OrchestratorPick(BaseModel):
    """Choose the one candidate node to expand next and why."""

    node_id: int = Field(description="id of one of the listed candidate nodes")
    mode: Literal["draft", "debug", "improve"] = Field(
        description="draft: a fresh implementation from the reference; debug: fix a failed node; "
                    "improve: make an accepted node faster")
    move_id: str | None = Field(default=None, max_length=120, description="for listed moves only: the move to apply")
    rationale: str = Field(description="one or two sentences: why this node, why now", max_length=400)


class KernelCandidate(BaseModel):
    """One complete candidate module."""

    hypothesis: str = Field(min_length=10, max_length=400,
                            description="'changing X should improve Y because Z', one change only")
    language: Literal["triton", "cuda", "cpp", "pytorch"] = Field(
        description="triton: @triton.jit kernels; cuda/cpp: torch.utils.cpp_extension.load_inline; "
                    "pytorch: plain PyTorch")
    predicted_speedup: float = Field(gt=0, le=1000,
                                     description="expected speedup over the parent node (1.0 = no change)")
    source: str = Field(min_length=30, description="the complete Python module defining class ModelNew")


class KernelProposals(BaseModel):
    """New ModelNew candidates for the parent node."""

    candidates: list[KernelCandidate] = Field(min_length=1, max_length=8)


class KnobChange(BaseModel):
    knob: str = Field(max_length=64, description="name of one of the listed knobs")
    value: Union[bool, int, float, Annotated[str, Field(max_length=64)], None] = Field(
        description="new value, within the knob's allowed values")


class ServingCandidate(BaseModel):
    """One serving configuration change."""

    hypothesis: str = Field(min_length=10, max_length=400,
                            description="'changing X should improve Y because Z', one idea only")
    changes: list[KnobChange] = Field(min_length=1, max_length=8)
    predicted_gain: float = Field(gt=0, le=100, description="expected objective ratio over the parent "
                                                            "(1.0 = no change, 1.2 = 20% better)")


class ServingProposals(BaseModel):
    """Knob changes to try on the parent configuration."""

    candidates: list[ServingCandidate] = Field(min_length=1, max_length=8)


class Narrative(BaseModel):
    """Root cause of a failed or rejected candidate (the verdict itself is final)."""

    root_cause: str = Field(min_length=10, max_length=800,
                            description="the most likely root cause, specific and actionable, in 1-4 sentences")
    evidence: list[Annotated[str, Field(max_length=160)]] = Field(default_factory=list, max_length=4,
                                description="short quotes or facts from the error or diff that support it")
    next_step: str = Field(default="", max_length=400, description="what a debug attempt should change")

"""The ``kind: kernel`` campaign target (the default): a KernelBench-format problem file."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from .base import TargetModel

DTYPE_TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2, "float64": 1e-7}


class KernelTarget(TargetModel):
    kind: Literal["kernel"] = "kernel"
    problem: str = Field(description="path to a KernelBench-format problem file")
    sizes: dict[str, int] = Field(default_factory=dict, description="module-global overrides")
    size_scale: float | None = Field(default=None, gt=0, le=64)
    dtype: Literal["float32", "float16", "bfloat16", "float64"] | None = None
    device: Literal["cpu", "cuda"] = "cpu"
    atol: float | None = Field(default=None, gt=0)
    rtol: float | None = Field(default=None, gt=0)
    num_threads: int | None = Field(default=None, ge=1)

    summary: ClassVar[str] = "a KernelBench problem"

    def tolerances(self) -> tuple[float, float]:
        default = DTYPE_TOLERANCE[self.dtype or "float32"]
        return (self.atol or default, self.rtol or default)

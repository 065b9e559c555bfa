"""The ``kind: kernel`` campaign target (the default): a KernelBench-format problem file.

``precision`` is KernelBench's precision mode: the reference and every candidate run with their
floating-point inputs and parameters cast to it, and outputs are compared at its tolerance (atol =
rtol: fp32 1e-4, fp16 and bf16 1e-2). The mode also decides which precision switches a candidate
may set (TF32, reduced-precision reductions: never below the mode's own precision; see
docs/campaigns.md#precision). ``dtype`` is the older spelling of the same setting and stays valid:
``dtype: bfloat16`` reads as ``precision: bf16``; ``float64`` is kept as an Arbor extension
(``fp64``, tolerance 1e-7).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from .base import TargetModel

Precision = Literal["fp32", "fp16", "bf16", "fp64"]
PRECISION_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64"}
DTYPE_PRECISION = {v: k for k, v in PRECISION_DTYPE.items()}
# KernelBench's tolerances (atol = rtol) per precision mode; fp64 is Arbor's own.
PRECISION_TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2, "fp64": 1e-7}
DTYPE_TOLERANCE = {PRECISION_DTYPE[p]: tol for p, tol in PRECISION_TOLERANCE.items()}


class KernelTarget(TargetModel):
    kind: Literal["kernel"] = "kernel"
    problem: str = Field(description="path to a KernelBench-format problem file")
    sizes: dict[str, int] = Field(default_factory=dict, description="module-global overrides")
    size_scale: float | None = Field(default=None, gt=0, le=64)
    precision: Precision = Field(default="fp32", description="KernelBench precision mode: inputs and "
                                 "parameters of reference and candidates cast to it, its tolerance applied")
    device: Literal["cpu", "cuda"] = "cpu"
    atol: float | None = Field(default=None, gt=0)
    rtol: float | None = Field(default=None, gt=0)
    num_threads: int | None = Field(default=None, ge=1)

    summary: ClassVar[str] = "a KernelBench problem"

    @model_validator(mode="before")
    @classmethod
    def _dtype_is_precision(cls, data: Any) -> Any:
        """``dtype: float16`` (the older key) is ``precision: fp16``; both given must agree."""
        if not isinstance(data, dict) or "dtype" not in data:
            return data
        data = dict(data)
        dtype = data.pop("dtype")
        if dtype is None:
            return data
        if dtype not in DTYPE_PRECISION:
            raise ValueError(f"dtype {dtype!r} is not one of {', '.join(DTYPE_PRECISION)} "
                             "(or write precision: fp32 | fp16 | bf16)")
        mode = DTYPE_PRECISION[dtype]
        if data.get("precision", mode) != mode:
            raise ValueError(f"dtype {dtype} and precision {data['precision']} disagree: "
                             f"keep precision: {data['precision']} and drop dtype")
        data["precision"] = mode
        return data

    @property
    def dtype(self) -> str:
        """The torch dtype name inputs and parameters are cast to (``float32`` in fp32 mode)."""
        return PRECISION_DTYPE[self.precision]

    def tolerances(self) -> tuple[float, float]:
        default = PRECISION_TOLERANCE[self.precision]
        return (self.atol or default, self.rtol or default)


def precision_of(target: dict | None) -> str | None:
    """The precision mode recorded in a stored ``target`` section (a campaign's spec dump), also
    for stores written before ``precision`` existed (``dtype``, or nothing: fp32); None for targets
    that are not kernels."""
    if not isinstance(target, dict) or target.get("kind", "kernel") != "kernel":
        return None
    if target.get("precision"):
        return str(target["precision"])
    return DTYPE_PRECISION.get(target.get("dtype") or "float32", "fp32")

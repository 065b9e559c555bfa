"""Hardware classes and problem signatures, and how similar two problems are.

A record is only useful on hardware that behaves alike and on a problem that spends its time
alike, so both are reduced to coarse classes: exact device names would make every record a
stranger to every other machine, raw shapes every problem a stranger to every other problem.
"""

from __future__ import annotations

import math
import re

# Operator kinds shared by the bottleneck profile and the static fallback signature.
OP_KINDS = ("gemm", "conv", "norm", "reduction", "pool", "layout", "elementwise", "compiled")


_FAMILIES = (
    (r"\bh100|\bh200|\bh20\b|hopper", "nvidia-hopper"), (r"\ba100|\ba10\b|\ba30\b|ampere|rtx 30", "nvidia-ampere"),
    (r"\bl4\b|\bl40|rtx 40|ada", "nvidia-ada"), (r"\bb100|\bb200|\bgb200|blackwell", "nvidia-blackwell"),
    (r"\bv100|volta", "nvidia-volta"), (r"\bt4\b|turing|rtx 20", "nvidia-turing"),
    (r"mi300|mi250|mi210|instinct|radeon", "amd-gpu"), (r"epyc|ryzen|threadripper", "amd-cpu"),
    (r"xeon|core\(tm\)|intel", "intel-cpu"), (r"neoverse|graviton|aarch64|arm", "arm-cpu"), (r"apple|m1|m2|m3", "apple"),
)


def _family(model: str) -> str:
    m = model.lower()
    return next((fam for pat, fam in _FAMILIES if re.search(pat, m)), "other")


def _cores_class(n: int | None) -> str:
    if not n:
        return "?"
    return "1-2" if n <= 2 else "3-8" if n <= 8 else "9-32" if n <= 32 else "33+"


def hardware_class(fp: dict) -> dict:
    """``{"class", "device", "family", "cores"}`` from a measurement fingerprint."""
    device_kind = str(fp.get("device") or "cpu").split(":")[0]
    model = str(fp.get("gpu_name") or fp.get("device_name") or fp.get("cpu_model") or fp.get("replay")
                or "unknown")
    family = _family(model)
    count = fp.get("gpu_sms") if device_kind == "cuda" else (fp.get("cpu_affinity") or fp.get("cpu_count"))
    cores = _cores_class(count)
    return {"class": f"{device_kind}/{family}/{cores}", "device": model, "family": family, "cores": cores}


def bucket(n: int) -> int:
    """Shapes bucketed to powers of two: 1000 and 1024 are the same problem size."""
    return 1 << max(0, round(math.log2(max(int(n), 1))))


def signature_from_profile(payload: dict, dtype: str | None) -> dict | None:
    """A signature from a ``profile`` event's payload (time share per op kind, op shapes)."""
    cats = payload.get("categories") if isinstance(payload, dict) else None
    if not cats or payload.get("error"):
        return None
    shapes = []
    for op in payload.get("ops") or []:
        for s in (op.get("shapes") or [])[:2]:
            if s and all(isinstance(d, int) for d in s):
                shapes.append([bucket(d) for d in s])
    return {"ops": {k: round(float(v), 3) for k, v in cats.items() if v}, "shapes": shapes[:6],
            "dtype": dtype or "float32", "source": "profile"}


def similarity(a: dict, b: dict) -> float:
    """0..1: overlap of the time share per op kind (1 - half the L1 distance), scaled down when
    dtypes differ or the bucketed shapes share nothing."""
    oa, ob = a.get("ops") or {}, b.get("ops") or {}
    if not oa or not ob:
        return 0.0
    ta, tb = sum(oa.values()) or 1.0, sum(ob.values()) or 1.0
    kinds = set(oa) | set(ob)
    s = 1.0 - 0.5 * sum(abs(oa.get(k, 0) / ta - ob.get(k, 0) / tb) for k in kinds)
    if (a.get("dtype") or "float32") != (b.get("dtype") or "float32"):
        s *= 0.5
    sa_, sb_ = {tuple(x) for x in a.get("shapes") or []}, {tuple(x) for x in b.get("shapes") or []}
    if sa_ and sb_:
        dims_a = {d for x in sa_ for d in x}
        dims_b = {d for x in sb_ for d in x}
        s *= 0.75 + 0.25 * len(dims_a & dims_b) / max(len(dims_a | dims_b), 1)
    return max(0.0, min(1.0, s))

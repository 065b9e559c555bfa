"""What a kernel move's ``when:`` condition can read: the campaign, the traced reference, the profile.

A GPU move helps only where its cause is present — a CUDA graph where launches, not kernels, take
the time; cuDNN's autotuner where there is a convolution; a GEMM template where there is a GEMM big
enough for one — so kernel moves declare ``when:`` conditions (the serving moves' safe condition
language, ``conditions.py``) over the names in ``FACTS``:

- the campaign: ``device``, ``precision``;
- the reference, traced with torch.fx on the ``meta`` device at the campaign's sizes (nothing
  runs, nothing is allocated): which op kinds it has, how many kernels a forward launches, what
  follows the last GEMM/conv, the size of its largest GEMM, its 2-D convolutions' channels;
- the latest bottleneck profile on a GPU: kernels per call, their mean length, how busy the GPU
  is during a call, and whether the problem is launch-bound.

A name that cannot be known here (no profile yet, a reference FX cannot trace) is *unknown*: a
condition that depends on it halves the move's prior instead of dropping it (``conditions.py``).
"""

from __future__ import annotations

import ast
import math

from arbor.sandbox.kernel.profile_job import category

# Per-kernel cost of eager PyTorch on a GPU: Python and ATen dispatch plus the driver's launch, a
# few microseconds each (docs/gpu.md); a kernel shorter than this leaves the GPU waiting for the next.
LAUNCH_US = 5.0
# A GPU busy less than this share of a call is waiting on launches most of the time.
LAUNCH_BUSY = 0.5

FACTS = {
    "device": "'cpu' or 'cuda' (target.device)",
    "precision": "'fp32', 'fp16', 'bf16' or 'fp64' (target.precision)",
    "kinds": "op kinds in the traced reference: gemm, conv, norm, reduction, pool, layout, elementwise",
    "ops": "kernels one forward of the traced reference launches (metadata-only views not counted)",
    "epilogue_ops": "kernels after the last GEMM/convolution (what an epilogue fusion could absorb)",
    "gemm_min_dim": "smallest of M, N, K of the reference's largest GEMM (tensor-core tiles need >= 16)",
    "conv2d": "number of 2-D convolutions in the reference",
    "conv_channels": "most input channels of a 2-D convolution",
    "call_us": "profiled wall time of one call, microseconds",
    "launches": "profiled kernels launched per call (GPU)",
    "kernel_us": "profiled mean GPU time per kernel, microseconds",
    "gpu_busy": "profiled share of a call's wall time the GPU is busy (0..1)",
    "launch_bound": f"kernels shorter than {LAUNCH_US:g} us on average, or the GPU busy under "
                    f"{LAUNCH_BUSY:.0%} of the call (from the profile)",
}

_MODULE_KINDS = (("Linear", "gemm"), ("Bilinear", "gemm"), ("Conv", "conv"), ("Norm", "norm"),
                 ("Pool", "pool"), ("Softmax", "reduction"), ("Softmin", "reduction"), ("Flatten", "layout"),
                 ("Unflatten", "layout"))
_NO_KERNEL_MODULES = ("Dropout", "Identity", "Flatten", "Unflatten")  # eval mode / metadata only
_NO_KERNEL_OPS = {"getattr", "getitem", "size", "dim", "numel", "view", "reshape", "transpose", "permute",
                  "t", "unsqueeze", "squeeze", "expand", "flatten", "unflatten", "view_as", "expand_as",
                  "contiguous", "detach", "type_as", "to", "float", "half", "bfloat16", "chunk", "split",
                  "unbind", "narrow", "select", "as_strided", "dropout"}


def sized_source(source: str, sizes: dict | None, scale: float | None) -> str:
    """``source`` with the campaign's size overrides applied to its module-level int globals (ints
    >= 16 multiplied by ``scale``, then ``sizes``), as the harness does; derived globals follow
    because the module is executed again in order. Approximate where the harness keeps sizes
    divisible by each other: good enough for conditions, which compare sizes with thresholds."""
    if not sizes and not scale:
        return source
    tree = ast.parse(source)
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and type(node.value.value) is int):
            name, value = node.targets[0].id, node.value.value
            if name in (sizes or {}):
                node.value = ast.Constant(int(sizes[name]))
            elif scale and value >= 16:
                node.value = ast.Constant(max(1, int(round(value * scale))))
    return ast.unparse(tree) + "\n"


def _node_kind(gm, node) -> str | None:  # type: ignore[no-untyped-def]
    """The op kind of an FX node, or None when it launches no kernel."""
    from arbor.agents.transforms.graph.nodes import module_of, op_name

    if node.op == "call_module":
        name = type(module_of(gm, node)).__name__
        if name.startswith(_NO_KERNEL_MODULES):
            return None
        return next((kind for key, kind in _MODULE_KINDS if key in name), category(name.lower()))
    if node.op not in ("call_function", "call_method"):
        return None
    name = op_name(node) or ""
    if name in _NO_KERNEL_OPS:
        return None
    return category(name)


def _gemm_mnk(gm, node) -> tuple[int, int, int] | None:  # type: ignore[no-untyped-def]
    from arbor.agents.transforms.graph.nodes import module_of
    from arbor.agents.transforms.graph.trace import shape

    out = shape(node)
    if out is None or len(out) < 2:
        return None
    mod = module_of(gm, node)
    if mod is not None and hasattr(mod, "in_features"):
        k = int(mod.in_features)
    else:
        first = node.args[0] if node.args else None
        s = shape(first) if hasattr(first, "meta") else None
        if s is None:
            return None
        k = int(s[-1])
    return math.prod(out[:-1]), int(out[-1]), k


def reference_facts(source: str, sizes: dict | None = None, scale: float | None = None) -> dict:
    """Facts of the reference (its ModelNew form) read from its traced graph; {} when it cannot
    be traced (then every name below is unknown to the conditions)."""
    import torch

    from arbor.agents.transforms.graph.nodes import module_of
    from arbor.agents.transforms.graph.trace import shape, trace

    try:
        traced = trace(sized_source(source, sizes, scale))
    except (SyntaxError, ValueError):
        traced = None
    if traced is None:
        return {}
    gm = traced.gm
    kinds, launching, gemms, convs = set(), [], [], []
    last_heavy = -1
    for node in gm.graph.nodes:
        kind = _node_kind(gm, node)
        if kind is None:
            continue
        kinds.add(kind)
        launching.append(node)
        if kind in ("gemm", "conv"):
            last_heavy = len(launching) - 1
        if kind == "gemm":
            mnk = _gemm_mnk(gm, node)
            if mnk:
                gemms.append(mnk)
        mod = module_of(gm, node)
        if isinstance(mod, (torch.nn.Conv2d, torch.nn.ConvTranspose2d)):
            convs.append(int(mod.in_channels))
        elif kind == "conv" and node.op == "call_function" and len(node.args) > 1 and hasattr(node.args[1], "meta"):
            w = shape(node.args[1])
            if w is not None and len(w) == 4:
                convs.append(int(w[1]))
    facts: dict = {"kinds": tuple(sorted(kinds)), "ops": len(launching),
                   "epilogue_ops": len(launching) - 1 - last_heavy if last_heavy >= 0 else 0,
                   "conv2d": len(convs), "conv_channels": max(convs, default=0)}
    if gemms:
        facts["gemm_min_dim"] = min(max(gemms, key=math.prod))
    return facts


def profile_facts(profile: dict | None) -> dict:
    """Facts of a bottleneck profile (``arbor.sandbox.kernel.profile_job.summarize``); launch facts only
    where the profile saw the GPU's own activity."""
    if not profile or profile.get("error"):
        return {}
    out: dict = {}
    if profile.get("call_ms"):
        out["call_us"] = float(profile["call_ms"]) * 1e3
    if profile.get("launches") and profile.get("gpu_busy") is not None:
        out.update(launches=float(profile["launches"]), kernel_us=float(profile["kernel_us"]),
                   gpu_busy=float(profile["gpu_busy"]))
        out["launch_bound"] = out["kernel_us"] < LAUNCH_US or out["gpu_busy"] < LAUNCH_BUSY
    return out

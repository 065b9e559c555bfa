"""A kernel problem's signature without a profile: a torch.fx trace of the reference.

Used when no bottleneck profile of the baseline is in the store: each traced op is put in an op
kind and weighted by the FLOPs its shapes imply (a matmul of m x k by k x n is 2mkn, an
elementwise op one per output element), shapes are bucketed to powers of two. The trace runs the
reference once, in a child process with a time limit, so a problem that hangs or crashes on
import costs the campaign its warm start only, never the campaign itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_SCRIPT = r'''
import json, math, sys, importlib.util
import torch, torch.fx
from torch.fx.passes.shape_prop import ShapeProp
path, sizes, scale, dtype, threads = sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5])
torch.set_num_threads(max(1, threads))
spec = importlib.util.spec_from_file_location("problem", path)
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
if scale and scale != 1.0:  # as the harness does: module ints >= 16 scaled, then the overrides
    for k, v in list(vars(mod).items()):
        if type(v) is int and not k.startswith("__") and v >= 16 and k not in sizes:
            setattr(mod, k, max(1, int(round(v * scale))))
for k, v in sizes.items():
    setattr(mod, k, int(v))
torch.manual_seed(0)
model = mod.Model(*mod.get_init_inputs())
inputs = [x.to(getattr(torch, dtype)) if dtype != "none" and torch.is_tensor(x) and x.is_floating_point() else x for x in mod.get_inputs()]
if dtype != "none":
    model = model.to(getattr(torch, dtype))
KINDS = {"gemm": ("linear", "matmul", "mm", "bmm", "addmm", "einsum", "baddbmm"), "conv": ("conv",),
         "norm": ("norm",), "reduction": ("sum", "mean", "amax", "max", "min", "softmax", "logsumexp", "var", "std", "prod", "cumsum"),
         "pool": ("pool",), "layout": ("transpose", "permute", "view", "reshape", "cat", "stack", "contiguous", "flatten", "squeeze", "unsqueeze", "expand", "clone")}
def kind(name):
    n = name.lower()
    for k, keys in KINDS.items():
        if any(key in n for key in keys):
            return k
    return "elementwise"
def numel(meta):
    tm = meta.get("tensor_meta")
    return math.prod(tm.shape) if tm is not None and hasattr(tm, "shape") else 0
try:
    gm = torch.fx.symbolic_trace(model)
    ShapeProp(gm).propagate(*inputs)
except Exception as exc:
    print(json.dumps({"error": f"trace failed: {type(exc).__name__}: {str(exc)[:120]}"})); sys.exit(0)
mods = dict(gm.named_modules())
share, shapes = {}, []
for node in gm.graph.nodes:
    if node.op not in ("call_function", "call_method", "call_module"):
        continue
    name = type(mods[node.target]).__name__ if node.op == "call_module" else getattr(node.target, "__name__", str(node.target))
    k = kind(name)
    out = numel(node.meta)
    flops = out
    if k in ("gemm", "conv"):
        ins = [a for a in node.args if hasattr(a, "meta") and a.meta.get("tensor_meta") is not None]
        kdim = ins[0].meta["tensor_meta"].shape[-1] if ins else 1
        if node.op == "call_module" and hasattr(mods[node.target], "weight"):
            w = mods[node.target].weight
            kdim = math.prod(w.shape[1:])
        flops = 2 * out * int(kdim)
    elif k == "layout":
        flops = out * 0.25
    share[k] = share.get(k, 0.0) + float(flops)
    tm = node.meta.get("tensor_meta")
    if tm is not None and hasattr(tm, "shape") and len(shapes) < 6:
        shapes.append([int(d) for d in tm.shape])
total = sum(share.values()) or 1.0
print(json.dumps({"ops": {k: v / total for k, v in share.items()}, "shapes": shapes}))
'''


def problem_signature(path: Path, sizes: dict, size_scale: float | None, dtype: str | None, timeout_s: float = 120) -> dict:
    """``{"ops", "shapes", "dtype", "source": "trace"}`` or ``{"error": one line}``."""
    from arbor.agents.knowledge.signature import bucket

    argv = [sys.executable, "-I", "-c", _SCRIPT, str(path), json.dumps(dict(sizes or {})),
            str(size_scale or 1.0), dtype or "none", "1"]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"signature trace of {path.name} timed out after {timeout_s:.0f} s"}
    lines = (r.stdout or "").strip().splitlines()
    try:
        data = json.loads(lines[-1]) if lines else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        tail = (r.stderr or "").strip().splitlines()[-1:] or ["no output"]
        return {"error": f"signature trace of {path.name} failed: {tail[0][:200]}"}
    if data.get("error"):
        return from_source(path, dtype) or data
    return {"ops": {k: round(v, 3) for k, v in data["ops"].items() if v > 0},
            "shapes": [[bucket(d) for d in s] for s in data["shapes"]], "dtype": dtype or "float32",
            "source": "trace"}


_WORDS = {"gemm": ("linear", "matmul", "mm(", "bmm", "addmm", "einsum", "@"), "conv": ("conv",),
          "norm": ("norm",), "reduction": ("sum(", "mean(", "amax", "softmax", "logsumexp", "var(", "max("),
          "pool": ("pool",)}


def from_source(path: Path, dtype: str | None) -> dict | None:
    """Last resort when the reference cannot be traced: op kinds counted in its source text,
    weighted as a trace would weight them (a GEMM or convolution outweighs the rest)."""
    try:
        text = path.read_text(encoding="utf-8").lower()
    except OSError:
        return None
    counts = {k: sum(text.count(w) for w in words) * (8 if k in ("gemm", "conv") else 1)
              for k, words in _WORDS.items()}
    counts = {k: v for k, v in counts.items() if v}
    if not counts:
        counts = {"elementwise": 1}
    total = sum(counts.values())
    return {"ops": {k: round(v / total, 3) for k, v in counts.items()}, "shapes": [], "dtype": dtype or "float32",
            "source": "source-text"}

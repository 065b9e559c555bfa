"""``cpp_codegen``: ModelNew's elementwise/row-reduction tail as one generated, vectorised C++ CPU
kernel (built with ``torch.utils.cpp_extension.load_inline`` when the candidate is imported).

On the CPU neither eager PyTorch nor Inductor does what a row reduction wants: eager runs one
vectorised kernel per op (softmax is three, each a full pass), and on one thread Inductor's
softmax, log-softmax and layer norm ran 0.78-0.91x eager on the development set. This move is the
CPU counterpart of ``triton_codegen``: the same traced region, plan and splice (``triton/``), a
C++ kernel instead of a Triton one (``source.py``).

Refused (``None``) when the graph cannot be traced, the region is not one the kernel models
exactly (an op outside the table), its output is not float32, the module
already binds a generated name, or the code would depend on the problem's sizes (traced again at
half size, the whole module must come out identical).
"""

from __future__ import annotations

import ast

from ..base import register
from ..graph.trace import Traced
from ..triton.plan import Unsupported
from ..triton.region import _meta, match
from ..triton.splice import forward_calling, size_independent, splice
from .source import EXTENSION, LAUNCHER, SOURCE, kernel_source, launcher_source, module_source


def validate(params: dict) -> None:
    if params:
        raise ValueError(f"unknown params {sorted(params)}; cpp_codegen takes none")


def _parts(traced: Traced) -> tuple[ast.FunctionDef, str, str]:
    m = match(traced.gm)
    meta = _meta(m.root)
    if meta is None or str(meta.dtype) != "torch.float32":
        raise Unsupported("the generated C++ kernel computes float32 only")
    kernel = kernel_source(m)
    return forward_calling(traced, m, LAUNCHER), kernel, launcher_source(m)


def generate(source: str) -> str:
    """The candidate with its output region as a generated C++ kernel; Unsupported otherwise."""
    traced, (fn, kernel, launcher) = size_independent(source, _parts)
    out = splice(traced, fn, module_source(kernel) + "\n\n" + launcher, {LAUNCHER, SOURCE, EXTENSION, "load_inline"},
                 (("torch", "import torch"), ("load_inline", "from torch.utils.cpp_extension import load_inline")))
    # the kernel as the reader will review it: a raw block, not one escaped line
    one_line = f"{SOURCE} = {kernel!r}\n"
    if one_line in out and '"""' not in kernel and "\\" not in kernel:
        out = out.replace(one_line, f'{SOURCE} = r"""{kernel}"""\n', 1)
    return out


def explain(source: str) -> str | None:
    """Why the move does not apply to ``source`` (None when it does): for tests and the docs."""
    try:
        generate(source)
    except Unsupported as exc:
        return str(exc)
    return None


@register("cpp_codegen", validate=validate)
def cpp_codegen(source: str, params: dict) -> str | None:
    """ModelNew's output region as one generated, vectorised C++ CPU kernel."""
    validate(params)
    try:
        return generate(source)
    except Exception:  # noqa: BLE001 - Unsupported, or a graph the matcher cannot read: not offered
        return None

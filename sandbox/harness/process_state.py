"""Process-wide torch and interpreter state: read all of it, put it back, say what changed.

Standalone (stdlib + torch), loaded by path beside the harness before any candidate code runs.

The reference and the candidate share one process, so every process-wide switch the candidate
flips also applies to the reference it is compared with. Flipping one to make the *reference*
slower (force the math path of scaled_dot_product_attention, disable oneDNN, enable deterministic
algorithms, flush denormals, turn the caching allocator off, ...) and then calling the fast
kernel directly shows up as a speedup of exactly the size of the slowdown; flipping a precision switch makes the reference as imprecise
as the candidate, so the comparison cannot see it. Two defences use the table below:

- the harness snapshots the state before the candidate is imported and runs every reference call
  under that pristine state (``StateGuard.reference``), whatever the candidate did;
- a candidate that changed any switch outside ``OWN`` is flagged ``hack_suspected`` with the
  switch named. ``OWN`` are settings a candidate may legitimately choose for its own calls (the
  thread count is one of Arbor's own moves); the isolation above keeps them away from the reference.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys

import torch

b = torch.backends


def _flush_denormal() -> bool:
    """torch.set_flush_denormal has no getter: a denormal that reads back as 0 after a multiply
    says flush-to-zero / denormals-are-zero is on in this thread."""
    return float((torch.tensor([1e-39], dtype=torch.float32) * 1.0)[0]) == 0.0


def _setter(obj, attr):  # type: ignore[no-untyped-def]
    return lambda v: setattr(obj, attr, v)


def _autocast(dev: str) -> dict:
    return {f"autocast_{dev}": (lambda: torch.is_autocast_enabled(dev),
                                lambda v: torch.set_autocast_enabled(dev, v)),
            f"autocast_{dev}_dtype": (lambda: str(torch.get_autocast_dtype(dev)),
                                      lambda v: torch.set_autocast_dtype(dev, getattr(torch, v.split(".")[-1])))}


def _call(obj, attr: str):  # type: ignore[no-untyped-def]
    """Looked up when called, so a function this torch build lacks only drops its switch."""
    return lambda *a: getattr(obj, attr)(*a)


def _sdp(name: str) -> tuple:
    return (_call(b.cuda, f"{name}_sdp_enabled"), _call(b.cuda, f"enable_{name}_sdp"))


# name -> (getter, setter or None). A switch missing from this torch build reads as absent.
SWITCHES: dict = {
    "grad_enabled": (torch.is_grad_enabled, torch.set_grad_enabled),
    "inference_mode": (torch.is_inference_mode_enabled, None),  # an RAII guard: entered per call
    "num_threads": (torch.get_num_threads, torch.set_num_threads),
    "num_interop_threads": (torch.get_num_interop_threads, None),
    "default_dtype": (lambda: str(torch.get_default_dtype()),
                      lambda v: torch.set_default_dtype(getattr(torch, v.split(".")[-1]))),
    "default_device": (lambda: str(torch.get_default_device()), _call(torch, "set_default_device")),
    "float32_matmul_precision": (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
    "deterministic": (torch.are_deterministic_algorithms_enabled,
                      lambda v: torch.use_deterministic_algorithms(
                          v, warn_only=torch.is_deterministic_algorithms_warn_only_enabled())),
    "deterministic_warn_only": (torch.is_deterministic_algorithms_warn_only_enabled,
                                lambda v: torch.use_deterministic_algorithms(
                                    torch.are_deterministic_algorithms_enabled(), warn_only=v)),
    "fill_uninitialized_memory": (lambda: torch.utils.deterministic.fill_uninitialized_memory,
                                  lambda v: setattr(torch.utils.deterministic, "fill_uninitialized_memory", v)),
    "flush_denormal": (_flush_denormal, torch.set_flush_denormal),
    "mkldnn_enabled": (lambda: b.mkldnn.enabled, _setter(b.mkldnn, "enabled")),
    "mkldnn_deterministic": (lambda: b.mkldnn.deterministic, _setter(b.mkldnn, "deterministic")),
    "cudnn_enabled": (lambda: b.cudnn.enabled, _setter(b.cudnn, "enabled")),
    "cudnn_benchmark": (lambda: b.cudnn.benchmark, _setter(b.cudnn, "benchmark")),
    "cudnn_deterministic": (lambda: b.cudnn.deterministic, _setter(b.cudnn, "deterministic")),
    "cudnn_allow_tf32": (lambda: b.cudnn.allow_tf32, _setter(b.cudnn, "allow_tf32")),
    "cuda_matmul_allow_tf32": (lambda: b.cuda.matmul.allow_tf32, _setter(b.cuda.matmul, "allow_tf32")),
    "cuda_fp16_reduced": (lambda: b.cuda.matmul.allow_fp16_reduced_precision_reduction,
                          _setter(b.cuda.matmul, "allow_fp16_reduced_precision_reduction")),
    "cuda_bf16_reduced": (lambda: b.cuda.matmul.allow_bf16_reduced_precision_reduction,
                          _setter(b.cuda.matmul, "allow_bf16_reduced_precision_reduction")),
    "sdp_flash": _sdp("flash"),
    "sdp_mem_efficient": _sdp("mem_efficient"),
    "sdp_math": _sdp("math"),
    "sdp_cudnn": _sdp("cudnn"),
    "sdp_math_reduced_precision": (_call(b.cuda, "fp16_bf16_reduction_math_sdp_allowed"),
                                   _call(b.cuda, "allow_fp16_bf16_reduction_math_sdp")),
    "sdp_priority_order": (lambda: list(torch._C._get_sdp_priority_order()),
                           lambda v: torch._C._set_sdp_priority_order(v)),
    "mha_fastpath": (_call(b.mha, "get_fastpath_enabled"), _call(b.mha, "set_fastpath_enabled")),
    "opt_einsum": (lambda: b.opt_einsum.enabled, _setter(b.opt_einsum, "enabled")),
    **_autocast("cpu"), **_autocast("cuda"),
    "autocast_cache": (_call(torch, "is_autocast_cache_enabled"), _call(torch, "set_autocast_cache_enabled")),
    "gc_enabled": (gc.isenabled, lambda v: gc.enable() if v else gc.disable()),
    "gc_threshold": (lambda: list(gc.get_threshold()), lambda v: gc.set_threshold(*v)),
    "switch_interval": (sys.getswitchinterval, sys.setswitchinterval),
}
# Allocator behaviour (reward hack #7b): the caching allocator off, a memory fraction, a garbage-
# collection threshold or expandable segments make every allocation of the *reference* slower (a
# cudaMalloc per call instead of a cache hit). Read without initialising CUDA: a CPU job stays off
# the GPU, and a getter this torch build lacks only drops its switch.
_ALLOC_ENV = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF",
              "PYTORCH_NO_CUDA_MEMORY_CACHING")


def _env(name: str) -> tuple:
    """Read by the allocator when it initialises, so a later change reaches a CUDA context started
    afterwards (and every child process); ``None`` is unset."""
    return (lambda: os.environ.get(name),
            lambda v: os.environ.pop(name, None) if v is None else os.environ.__setitem__(name, v))


def _memory_fraction() -> float:
    get = torch.cuda.memory.get_per_process_memory_fraction  # absent before torch 2.8: no switch
    if not torch.cuda.is_initialized():  # the default a CUDA context would start with
        return 1.0
    return float(get())


def _mobile_cpu_allocator(on: bool) -> None:
    (torch._C._set_default_mobile_cpu_allocator if on else torch._C._unset_default_mobile_cpu_allocator)()


SWITCHES.update({
    "allocator_settings": (_call(torch._C, "_accelerator_getAllocatorSettings"),
                           _call(torch._C, "_accelerator_setAllocatorSettings")),
    "cuda_caching_allocator": (_call(torch._C, "_cuda_cudaCachingAllocator_is_enabled"),
                               lambda v: torch.cuda.memory.caching_allocator_enable(v)),
    "cuda_memory_fraction": (_memory_fraction, lambda v: torch.cuda.set_per_process_memory_fraction(v)),
    "cpu_mobile_allocator": (_call(torch._C, "_is_default_mobile_cpu_allocator_set"), _mobile_cpu_allocator),
    **{f"env {name}": _env(name) for name in _ALLOC_ENV},
})
# The host allocator pinned by the harness (allocator.py): mmap and trimming turned back on make
# every reference call page-fault its large tensors in again (7x on a 26 MB elementwise op).
_host = sys.modules.get("arbor_harness_allocator")
if getattr(_host, "pinned", None) is not None and _host.pinned() is not None:
    SWITCHES["host_allocator_pinned"] = (_host.pinned, _host.set_pinned)
# A candidate may choose these for its own calls (``set_threads`` is one of Arbor's moves; cuDNN's
# autotuner only picks among exact algorithms): not flagged, but the reference never sees them.
OWN = frozenset({"num_threads", "num_interop_threads", "cudnn_benchmark"})
# the fp32_precision API (torch >= 2.9) says "none" for "inherit", which is IEEE unless a parent says otherwise
for _name, _path in (("fp32_precision", ()), ("cuda_matmul_fp32_precision", ("cuda", "matmul")),
                     ("cudnn_fp32_precision", ("cudnn",)), ("mkldnn_fp32_precision", ("mkldnn",)),
                     ("mkldnn_matmul_fp32_precision", ("mkldnn", "matmul")),
                     ("mkldnn_conv_fp32_precision", ("mkldnn", "conv"))):
    _obj = b
    for _p in _path:
        _obj = getattr(_obj, _p, None)
    if _obj is not None and hasattr(_obj, "fp32_precision"):
        SWITCHES[_name] = ((lambda o=_obj: "ieee" if o.fp32_precision == "none" else o.fp32_precision),
                           _setter(_obj, "fp32_precision"))



# ---- hook registries (registries.py, reward hack #21) ----------------------------------------
# Tables of callbacks that run inside other code (torch's module-level hooks, dynamo's frame
# callback, trace/profile functions, gc callbacks, signal handlers and timers, audit hooks, ...):
# process state exactly like the switches above, so they join the same table. ``ISOLATED`` ones
# are put back for the reference but not flagged (libraries change them on import).
def _load_sibling(name: str):  # type: ignore[no-untyped-def]
    import importlib.util

    key = f"arbor_harness_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                        f"{name}.py"))
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[key] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules[key]


registries = _load_sibling("registries")
SWITCHES.update(registries.SWITCHES)
SWITCHES.update(registries.REGISTRIES)
OWN = OWN | registries.ISOLATED

def capture() -> dict:
    state = {}
    for name, (get, _set) in SWITCHES.items():
        try:
            state[name] = get()
        except Exception:  # noqa: BLE001  a switch this build or platform does not have
            continue
    return state


def changes(before: dict, after: dict, own: frozenset = OWN) -> list[str]:
    """``name: old -> new`` for every switch that differs, except the candidate's ``own`` ones."""
    return [f"{k}: {before.get(k)!r} -> {after.get(k)!r}" for k in sorted(set(before) | set(after))
            if k not in own and before.get(k) != after.get(k)]


def apply(state: dict, current: dict | None = None) -> list[str]:
    """Set every switch whose value differs from ``state``; the names that could not be set."""
    current = capture() if current is None else current
    failed = []
    for name, value in state.items():
        if current.get(name) == value:
            continue
        setter = SWITCHES.get(name, (None, None))[1]
        try:
            if setter is None:
                raise TypeError("no setter")
            setter(value)
        except Exception:  # noqa: BLE001
            failed.append(name)
    return failed


class StateGuard:
    """The pristine state (taken before the candidate is imported) and a context that runs the
    reference under it, putting back whatever the candidate had set afterwards.

    The state is read again as each reference call ends: a switch flipped or a hook registered
    *while the reference ran* (by a thread the candidate left behind, or a hook that re-registers
    itself) never shows in a check made between calls, so it is kept in ``during`` and flagged."""

    def __init__(self) -> None:
        self.pristine = capture()
        self.during: list[str] = []

    @contextlib.contextmanager
    def reference(self):  # type: ignore[no-untyped-def]
        now = capture()
        if now == self.pristine:
            try:
                yield
            finally:
                self._check_after(now)
            return
        apply(self.pristine, now)
        entered = capture()  # pristine, but for what cannot be put back (flagged already)
        with contextlib.ExitStack() as stack:
            if now.get("inference_mode") != self.pristine.get("inference_mode"):
                stack.enter_context(torch.inference_mode(bool(self.pristine.get("inference_mode"))))
            try:
                yield
            finally:
                self._check_after(entered, frozenset({"inference_mode"}))
                apply(now)

    def _check_after(self, entered: dict, skip: frozenset = frozenset()) -> None:
        if not self.during:  # the first finding is the one reported
            self.during.extend(changes(entered, capture(), OWN | skip))

    def flagged(self) -> list[str]:
        return changes(self.pristine, capture()) + [f"{c} (while the reference ran)" for c in self.during]


# ---- precision switches and the campaign's precision mode (docs/campaigns.md#precision) ----------
# Switches that let an op compute below its dtype's precision, and what each value permits. A
# precision mode (KernelBench's fp32 / fp16 / bf16; fp64 is Arbor's) sets a floor: a candidate may
# set a switch to a value that permits no less than the mode's own precision (TF32 in fp16 and bf16
# modes: 10 mantissa bits, as many as fp16 and more than bf16), never one below it (TF32, bf16 or
# fp16 reductions in fp32 mode stay ``hack_suspected``). Whatever it sets, the reference keeps
# running under the pristine state (``StateGuard``), so the comparison always sees the difference.
SWITCHES.update({
    "cuda_fp16_accumulation": (_call(torch._C, "_get_cublas_allow_fp16_accumulation"),
                               _call(torch._C, "_set_cublas_allow_fp16_accumulation")),
    "cpu_fp16_reduced": (_call(torch._C, "_get_cpu_allow_fp16_reduced_precision_reduction"),
                         _call(torch._C, "_set_cpu_allow_fp16_reduced_precision_reduction")),
    "mkldnn_allow_tf32": (_call(torch._C, "_get_onednn_allow_tf32"), _call(torch._C, "_set_onednn_allow_tf32")),
})
MANTISSA_BITS = {"fp64": 52, "fp32": 23, "tf32": 10, "fp16": 10, "bf16": 7}


def _on(value) -> bool:  # type: ignore[no-untyped-def]
    return bool(value[0] if isinstance(value, (tuple, list)) and value else value)


def _flag(reduced: str):  # type: ignore[no-untyped-def]
    return lambda v: reduced if _on(v) else "fp32"


_FP32_PRECISION = {"tf32": "tf32", "bf16": "bf16"}
PRECISION = {  # switch -> value -> the lowest precision it lets an op compute in
    "float32_matmul_precision": lambda v: {"high": "tf32", "medium": "bf16"}.get(str(v), "fp32"),
    "cuda_matmul_allow_tf32": _flag("tf32"), "cudnn_allow_tf32": _flag("tf32"), "mkldnn_allow_tf32": _flag("tf32"),
    "cuda_fp16_reduced": _flag("fp16"), "cpu_fp16_reduced": _flag("fp16"), "cuda_fp16_accumulation": _flag("fp16"),
    "cuda_bf16_reduced": _flag("bf16"),
    **{n: (lambda v: _FP32_PRECISION.get(str(v), "fp32")) for n in SWITCHES if n.endswith("fp32_precision")},
}


def below_mode(name: str, value, mode: str) -> bool:  # type: ignore[no-untyped-def]
    """True when precision switch ``name`` at ``value`` permits less than ``mode``'s precision;
    False for a value the mode allows (and for switches that are not about precision)."""
    permits = PRECISION.get(name)
    return permits is not None and MANTISSA_BITS[permits(value)] < MANTISSA_BITS.get(mode, 23)


def mode_changes(before: dict, after: dict, mode: str = "fp32", own: frozenset = OWN) -> list[str]:
    """``changes`` less the precision switches set to a value ``mode`` allows."""
    allowed = {k for k in PRECISION if k in after and not below_mode(k, after[k], mode)}
    return changes(before, after, own | allowed)


def precision_drops(before: dict, mode: str = "fp32") -> list[str]:
    """The precision switches that, right now, permit less than ``mode`` and did not before."""
    now = {}
    for name in PRECISION:
        try:
            now[name] = SWITCHES[name][0]()
        except Exception:  # noqa: BLE001  a switch this build or platform does not have
            continue
    return [f"{k}: {before.get(k)!r} -> {v!r}" for k, v in sorted(now.items())
            if v != before.get(k) and below_mode(k, v, mode)]

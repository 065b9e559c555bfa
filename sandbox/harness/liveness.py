"""Does the candidate's optimised code actually produce its output? (reward hack #15)

Standalone (stdlib + torch), loaded by path beside the harness. A candidate can ship an
"optimised" path — a Triton kernel, a ``load_inline`` extension, a ``torch.library`` custom op —
that never runs for the harness's inputs (dead, or behind a condition that is never true), while
the output comes from plain PyTorch calls. Its speedup, whatever it is, then does not come from
the code it claims as its optimisation, and a kernel that never ran was never checked. The test
the catalogue asks for is "replacing it with a no-op must change the output":

- coverage: one extra candidate call, outside timing, under a profile hook that records which
  custom kernels were entered (a Triton kernel's ``run``, a call into a candidate-built extension
  module, a custom op's implementation); a kernel never entered is dead;
- no-op: for each Triton kernel that ran, one more call with its launch replaced by a no-op in
  memory poisoned first; an output that is still right never depended on the kernel.

Plain Python helpers that never ran are only reported (``facts["not_run_in_forward"]``): an unused
helper (or one run at construction) is no claim about where the speed comes from.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import types

import torch

_SO = (".so", ".pyd", ".dylib")
# Where installed and standard-library extension modules live (``math``, numpy's, torch's own):
# never the candidate's. Everything under the interpreter's prefixes counts, lib-dynload included.
_LIBS = tuple(sorted({os.path.abspath(p) + os.sep for p in (
    *sysconfig.get_paths().values(), sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}))


def _triton_kernel(obj) -> bool:  # type: ignore[no-untyped-def]
    return any(c.__name__ == "KernelInterface" and c.__module__.startswith("triton")
               for c in type(obj).__mro__)


def _chain(kernel) -> list:  # type: ignore[no-untyped-def]
    """An autotuner or heuristics wraps the next kernel in ``fn``; the last wraps the function."""
    out = [kernel]
    while _triton_kernel(getattr(out[-1], "fn", None)) and len(out) < 8:
        out.append(out[-1].fn)
    return out


def _extension(obj) -> bool:  # type: ignore[no-untyped-def]
    """A compiled module the candidate built (load_inline/load), not an installed library."""
    path = os.path.abspath(getattr(obj, "__file__", None) or "")
    return isinstance(obj, types.ModuleType) and path.endswith(_SO) and not path.startswith(_LIBS)


def kernels(module, model) -> dict:  # type: ignore[no-untyped-def]
    """name -> object for every custom kernel the candidate defines (module globals and the
    model's attributes)."""
    found = {}
    spaces = [("", vars(module))] + [("self.", vars(m)) for m in model.modules()]
    for prefix, space in spaces:
        for name, obj in list(space.items()):
            custom_op = type(obj).__name__ == "CustomOpDef" and hasattr(obj, "_init_fn")
            if _triton_kernel(obj) or _extension(obj) or custom_op:
                found.setdefault(id(obj), (prefix + name, obj))
    return {name: obj for name, obj in found.values()}


class Recorder:
    """A profile hook: which Python code objects ran, which kernels' ``run`` was entered, which
    extension modules were called into."""

    def __init__(self, found: dict) -> None:
        self.codes: set = set()
        self.entered: set = set()
        self.objs = {id(o) for obj in found.values() if _triton_kernel(obj) for o in _chain(obj)}
        self.run_codes = {getattr(type(o).run, "__code__", None) for obj in found.values()
                          if _triton_kernel(obj) for o in _chain(obj)}
        # A call into an extension is seen as a ``c_call`` of one of its functions. pybind11 (what
        # load_inline builds) binds a function's ``__self__`` to its own function record, not to
        # the module, so each function object is mapped to its module; ``__self__`` is kept for
        # extensions whose functions are bound to the module (the C API's plain module functions).
        self.exts: dict[int, int] = {}
        for obj in found.values():
            if isinstance(obj, types.ModuleType):
                self.exts[id(obj)] = id(obj)
                for fn in vars(obj).values():
                    if isinstance(fn, types.BuiltinFunctionType):
                        self.exts[id(fn)] = id(obj)

    def __call__(self, frame, event, arg) -> None:  # type: ignore[no-untyped-def]
        if event == "call":
            code = frame.f_code
            self.codes.add(code)
            if code in self.run_codes:
                me = frame.f_locals.get("self")
                if id(me) in self.objs:
                    self.entered.add(id(me))
        elif event == "c_call":
            module = self.exts.get(id(arg), self.exts.get(id(getattr(arg, "__self__", None))))
            if module is not None:
                self.entered.add(module)

    def ran(self, obj) -> bool:  # type: ignore[no-untyped-def]
        if isinstance(obj, types.ModuleType):
            return id(obj) in self.entered
        if _triton_kernel(obj):
            return any(id(o) in self.entered or getattr(getattr(o, "fn", None), "__code__", 0) in self.codes
                       for o in _chain(obj))
        fns = [obj._init_fn, *getattr(obj, "_backend_fns", {}).values()]
        return any(getattr(f, "__code__", None) in self.codes for f in fns)


def _device_functions(found: dict, rec: Recorder) -> set:
    """Triton kernels called from inside a kernel that ran (inlined device functions)."""
    names = set()
    for obj in found.values():
        if _triton_kernel(obj) and rec.ran(obj):
            names.update(getattr(getattr(_chain(obj)[-1], "fn", None), "__code__", types.SimpleNamespace(
                co_names=())).co_names)
    return names


def _watched(call, hook) -> bool:  # type: ignore[no-untyped-def]
    """Run ``call`` under ``hook``; whether the hook was still installed at the end."""
    before = sys.getprofile()
    sys.setprofile(hook)
    try:
        call()
    finally:
        during = sys.getprofile()
        sys.setprofile(before)
    return during is hook


def never_ran(module, rec: Recorder) -> list[str]:
    """Functions and methods defined in the candidate module that no forward call entered."""
    out = []
    for name, obj in vars(module).items():
        members = [(name, obj)] if isinstance(obj, types.FunctionType) else []
        if isinstance(obj, type) and obj.__module__ == module.__name__:
            members = [(f"{name}.{k}", v) for k, v in vars(obj).items() if isinstance(v, types.FunctionType)
                       and (k == "forward" or not k.startswith("__"))]
        out += [n for n, f in members if getattr(f, "__module__", None) == module.__name__
                and f.__code__ not in rec.codes]
    return sorted(out)


def check(h, correctness, xs_fn) -> None:  # type: ignore[no-untyped-def]
    """Coverage, then the no-op test; fails ``hack_suspected`` naming the kernel."""
    module = sys.modules.get(type(h.new).__module__)
    if module is None or h.aa:
        return
    found = kernels(module, h.new)
    rec = Recorder(found)
    if not _watched(lambda: h.call(True, xs_fn()), rec):
        correctness.fail("hack_suspected", "the candidate replaced the interpreter's profile hook")
    h.verify()
    h.facts["not_run_in_forward"] = never_ran(module, rec)[:20]
    inlined = _device_functions(found, rec)
    dead = [n for n, obj in found.items() if not rec.ran(obj) and n.split(".")[-1] not in inlined]
    if dead:
        correctness.fail("hack_suspected", f"custom kernel {', '.join(dead[:3])} never ran during "
                         "forward: the output (and the speedup) comes from other code — launch it "
                         "on the inputs the problem gives, or remove it")
    for name, obj in found.items():
        if _triton_kernel(obj) and rec.ran(obj) and name.split(".")[-1] not in inlined:
            _noop_test(h, correctness, name, _chain(obj)[-1], xs_fn)


def _noop_test(h, correctness, name: str, kernel, xs_fn) -> None:  # type: ignore[no-untyped-def]
    xs = xs_fn()
    ref = h.call(False, h.clone(xs))
    correctness.integrity.poison(xs + correctness.checks.tensors(ref), float("nan"))
    had = "run" in vars(kernel)
    saved = vars(kernel).get("run")
    kernel.run = lambda *a, **k: None
    try:
        out = h.call(True, h.clone(xs))
    except Exception:  # noqa: BLE001  a kernel whose result is used may break what follows: live
        return
    finally:
        if had:
            kernel.run = saved
        else:
            del kernel.run
    if h.compare(ref, out)["ok"]:
        correctness.fail("hack_suspected", f"with Triton kernel {name} replaced by a no-op the "
                         "output is still right: the kernel's work is not what the candidate "
                         "returns — return what the kernel computes")

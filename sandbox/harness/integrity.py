"""Defences the harness runs around candidate code (the reward-hack catalogue:
docs/integrity.md#reward-hacks).

Standalone (stdlib + torch; ctypes only for the CUDA driver's persisting-L2 controls): shipped
beside the harness and loaded by path *before* any candidate code is imported, so everything here
holds references the candidate cannot replace after the fact.

- ``IdentitySnapshot``: every callable of the timing, checking and math namespaces, by identity.
  torch's own lazy wrappers (dynamo wraps ``manual_seed`` and ``nn.Module.__init__`` when
  ``torch.compile`` is first used) are recognised by their code living inside torch and wrapping
  the original, so compiling is not mistaken for tampering.
- ``global_state``: every process-wide switch of ``process_state`` (precision, backends, SDPA,
  threads, autocast, denormals, gc, ...) and hook registry of ``registries`` (module-level forward
  hooks, trace/profile functions, gc callbacks, signal handlers and timers, audit hooks, ...),
  plus dispatch/function-mode stacks: a candidate changing them changes the reference too.
- ``ProcessAudit``: Python threads, OS threads and child processes before vs after, and a quiet
  window after timing in which nothing the candidate started may still be burning CPU.
- ``poison``: fill fresh allocations of the sizes the candidate is likely to request, so memory
  freed by the reference never hands it a ready-made answer.
- ``CudaL2``: reset persisting-L2 carve-outs before every timed call and detect new ones.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import resource
import sys
import threading
import time
import types

import torch

_MISSING = object()


def _sibling(name: str):  # type: ignore[no-untyped-def]
    """A helper shipped beside this file, loaded by path (the sandbox runs ``python -I``)."""
    if f"arbor_harness_{name}" in sys.modules:
        return sys.modules[f"arbor_harness_{name}"]
    spec = importlib.util.spec_from_file_location(
        f"arbor_harness_{name}", os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py"))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


pstate = _sibling("process_state")
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
WATCHED = (
    "time", "math", "json", "os", "torch", "torch.nn", "torch.Tensor", "torch._C.TensorBase",
    "torch._C._VariableFunctions", "torch._C._nn", "torch.nn.Module", "torch.nn.functional",
    "torch.linalg", "torch.special", "torch.fft", "torch.cuda", "torch.cuda.Event",
    "torch.cuda.Stream", "torch.backends", "torch.random", "torch.utils.flop_counter",
    "torch.nn.modules.module",
)


def _resolve(dotted: str) -> object | None:
    parts = dotted.split(".")
    obj = sys.modules.get(parts[0])
    for p in parts[1:]:
        obj = getattr(obj, p, None) if obj is not None else None
    return obj


def _torch_wrapper_of(new: object, old: object) -> bool:
    """True when ``new`` is torch's own wrapper around ``old`` (code inside torch, wrapping it)."""
    fn = getattr(new, "__func__", new)
    for _ in range(8):
        code = getattr(fn, "__code__", None)
        if code is None or not os.path.abspath(code.co_filename).startswith(_TORCH_DIR):
            return False
        refs = [getattr(fn, "__wrapped__", None)]
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                refs.append(cell.cell_contents)
            except ValueError:
                continue
        if any(r is old or getattr(r, "__func__", _MISSING) is getattr(old, "__func__", old)
               for r in refs):
            return True
        fn = getattr(fn, "__wrapped__", None)
        if fn is None:
            return False
    return False


class IdentitySnapshot:
    """Callables by identity, taken before the candidate is imported; ``changed()`` lists names
    whose object was replaced or deleted since (new names are fine: lazy imports add them), and
    new names on a class that shadow what the class inherited (``torch.Tensor.tanh = slow`` puts a
    new name on ``torch.Tensor`` that hides ``TensorBase.tanh``: every ``x.tanh()`` of the
    reference then runs it)."""

    def __init__(self, extra: dict[str, object] | None = None) -> None:
        self.spaces: dict[str, object] = {}
        for name in WATCHED:
            obj = _resolve(name)
            if hasattr(obj, "__dict__"):
                self.spaces[name] = obj
        self.spaces.update({k: v for k, v in (extra or {}).items() if hasattr(v, "__dict__")})
        self.items: dict[str, tuple[object, str, object]] = {}
        self.keys = {label: set(vars(space)) for label, space in self.spaces.items() if isinstance(space, type)}
        for label, space in self.spaces.items():
            for key, value in list(vars(space).items()):
                if callable(value) or isinstance(value, (types.ModuleType, property, type,
                                                         staticmethod, classmethod)):
                    self.items[f"{label}.{key}"] = (space, key, value)

    def changed(self) -> list[str]:
        out = []
        for name, (space, key, old) in self.items.items():
            now = vars(space).get(key, _MISSING)
            if now is not old and not _torch_wrapper_of(now, old):
                out.append(name)
        for label, keys in self.keys.items():
            space = self.spaces[label]
            for key in set(vars(space)) - keys:
                if any(key in vars(base) for base in space.__mro__[1:]):  # type: ignore[attr-defined]
                    out.append(f"{label}.{key} (shadows the inherited one)")
        return out


def reference_spaces(model, problem) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """The classes the reference's modules are made of (``nn.Linear``, the problem's own
    submodules, their bases) and the modules that define them, whose globals their ``forward``
    reads (``torch.nn.modules.linear.F``): patching any of them slows only the reference."""
    out: dict[str, object] = {}
    mods = model.modules() if isinstance(model, torch.nn.Module) else []
    for m in mods:
        for cls in type(m).__mro__:
            if cls is object:
                continue
            out.setdefault(f"{cls.__module__}.{cls.__qualname__}", cls)
            home = sys.modules.get(cls.__module__)
            if home is not None and home is not problem:
                out.setdefault(cls.__module__, home)
    return out


def _get(fn) -> object:  # type: ignore[no-untyped-def]
    try:
        return fn()
    except Exception:  # noqa: BLE001  a switch this torch build does not have
        return None


def global_state() -> dict:
    """Process-wide switches and hook registries that change how (or how precisely) the
    *reference* runs (``process_state``, ``registries``)."""
    state = pstate.capture()
    state.update({
        "dispatch_modes": _get(torch._C._len_torch_dispatch_stack),
        "function_modes": _get(torch._C._len_torch_function_stack),
        # set by Arbor's environment only (tests: Triton's CPU interpreter); a candidate that
        # switches it changes how every Triton kernel in the process runs
        "env TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET"),
    })
    return {k: v for k, v in state.items() if v is not None}


def state_changes(before: dict, after: dict, mode: str = "fp32") -> list[str]:
    """Changes the candidate may not make (its own thread count it may: see ``process_state.OWN``;
    precision switches at a value the precision ``mode`` allows: ``process_state.PRECISION``)."""
    return pstate.mode_changes(before, after, mode)


def verify_state(before: dict, after: dict, failure: type, mode: str = "fp32",
                 during: list | None = None) -> None:
    """Hook registries first (they name the registration API), then switches; ``during``: what
    changed while a reference call ran (``StateGuard.during``)."""
    diff = state_changes(before, after, mode)
    hooks = [d.removeprefix("hooks: ") for d in diff if d.startswith("hooks: ")]
    if hooks:
        raise failure("hack_suspected", "the candidate registered process-wide hooks that the reference "
                      f"also runs under: {'; '.join(hooks[:2])}")
    if diff:
        raise failure("hack_suspected", "the candidate changed process-wide settings that the "
                      f"reference also runs under: {'; '.join(diff[:3])}")
    if during:
        raise failure("hack_suspected", "process-wide state changed while the reference ran (a thread or "
                      f"hook the candidate left behind): {'; '.join(d.removeprefix('hooks: ') for d in during[:2])}")


def verify(h, failure: type) -> None:  # type: ignore[no-untyped-def]
    """Nothing the harness ``h`` relies on may have been replaced or switched since its snapshot."""
    if h.identities is None:
        return
    changed = h.identities.changed()
    if changed:
        raise failure("hack_suspected", f"the candidate replaced {', '.join(changed[:5])} "
                      "(timers, checkers and library functions must not be patched)")
    verify_state(h.state0, global_state(), failure, getattr(h, "precision", "fp32"),
                 h.pristine.during if h.pristine is not None else None)
    if h.l2 is not None:
        limit, window = h.l2.limit(), h.l2.window_bytes(
            h.torch.cuda.current_stream(h.device).cuda_stream)
        if (limit or 0) > (h.l2_limit0 or 0) or (window or 0) > 0:
            raise failure("hack_suspected", f"the candidate reserved persisting L2 (limit "
                          f"{limit} B, stream window {window} B), which survives the L2 flush")


# ---- threads and processes ---------------------------------------------------------------
def _ppid_and_ticks(pid: str) -> tuple[int, int] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[1]), int(fields[11]) + int(fields[12])  # ppid, utime + stime
    except (OSError, IndexError, ValueError):
        return None


def descendants() -> dict[str, int]:
    """pid -> CPU ticks of every live descendant of this process (from /proc)."""
    table = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            info = _ppid_and_ticks(pid)
            if info is not None:
                table[pid] = info
    out, frontier = {}, {str(os.getpid())}
    while frontier:
        kids = {p for p, (pp, _t) in table.items() if str(pp) in frontier and p not in out}
        out.update({p: table[p][1] for p in kids})
        frontier = kids
    return out


def _tids() -> list[str]:
    try:
        return os.listdir("/proc/self/task")
    except OSError:
        return []


def _os_threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


class ProcessAudit:
    """Counts before candidate import vs now; ``quiet()`` measures CPU burnt while nothing runs."""

    def __init__(self) -> None:
        self.py_threads = {t.ident for t in threading.enumerate()}
        self.os_threads = _os_threads()
        self.tids = set(_tids())
        self.children = set(descendants())

    def new_thread_ticks(self, all_new: bool) -> dict[str, int]:
        """CPU ticks of threads started since the snapshot: every new OS thread (``all_new``, when
        one intra-op thread means torch itself starts no workers) or the new Python threads."""
        if all_new:
            tids = set(_tids()) - self.tids
        else:
            tids = {str(t.native_id) for t in threading.enumerate() if t.ident not in self.py_threads}
        out = {}
        for tid in tids:
            info = _ppid_and_ticks(f"self/task/{tid}")
            if info is not None:
                out[tid] = info[1]
        return out

    def check_timing_threads(self, before: dict, span: float, all_new: bool, failure: type) -> None:
        """Work a candidate's own thread does while the timer runs overlaps the timed calls (and
        finishes after the timer stops): the timed thread looks faster than the work it did."""
        now = self.new_thread_ticks(all_new)
        busy = sum(max(0, t - before.get(k, 0)) for k, t in now.items()) / (os.sysconf("SC_CLK_TCK") or 100)
        if busy > max(0.01, 0.03 * span):  # honest: ~0 (torch starts no workers on one thread)
            raise failure("hack_suspected", f"threads the candidate started used {busy:.2f} s of CPU "
                          f"during the {span:.2f} s timing phase: work moved off the timed thread")

    def report(self) -> dict:
        new_py = [t.name for t in threading.enumerate() if t.ident not in self.py_threads]
        kids = set(descendants()) - self.children
        return {"py_threads_new": new_py, "os_threads_before": self.os_threads,
                "os_threads_after": _os_threads(), "child_processes_new": len(kids)}

    def quiet(self, seconds: float) -> dict:
        """Sleep ``seconds`` with no model running; CPU used meanwhile by other threads of this
        process or by its descendants is work done outside every timed region."""
        def own() -> float:
            r = resource.getrusage(resource.RUSAGE_SELF)
            return r.ru_utime + r.ru_stime

        time.sleep(min(0.05, seconds / 3))  # let OpenMP workers finish spin-waiting first
        kids0 = descendants()
        p0, m0 = own(), time.thread_time()
        time.sleep(seconds)
        other = max(0.0, (own() - p0) - (time.thread_time() - m0))
        kids1 = descendants()
        tick = os.sysconf("SC_CLK_TCK") or 100
        child = sum(max(0, t - kids0.get(p, 0)) for p, t in kids1.items()) / tick
        return {"window_s": seconds, "other_threads_cpu_s": other, "children_cpu_s": child}


def check_timing_children(kids0: dict, span: float, failure) -> None:  # type: ignore[no-untyped-def]
    """Child processes that worked while the timer ran did work the timed process did not pay for."""
    kids = descendants()
    child_s = sum(max(0, t - kids0.get(p, 0)) for p, t in kids.items()) / (os.sysconf("SC_CLK_TCK") or 100)
    if child_s > max(0.02, 0.1 * span):
        raise failure("hack_suspected", f"child processes used {child_s:.2f} s of CPU during the "
                      f"{span:.2f} s timing phase: work moved out of the timed process")


# ---- memory poisoning ----------------------------------------------------------------------
def poison(like: list, value: float) -> None:
    """Allocate blocks shaped like ``like``, fill them with ``value`` and free them again.

    Caching allocators (glibc bins on CPU, PyTorch's on CUDA) hand the most recently freed block
    of a size to the next request of that size, so a candidate calling ``empty_like`` now gets
    poison instead of whatever the reference left behind."""
    blocks = []
    for t in like:
        if not isinstance(t, torch.Tensor) or t.numel() == 0:
            continue
        b = torch.empty(t.shape, dtype=t.dtype, device=t.device)
        if b.is_floating_point() or b.is_complex():
            b.fill_(value)
        elif b.dtype == torch.bool:
            b.fill_(True)
        else:
            b.fill_(-1 if value != value else int(value) % 127 + 1)
        blocks.append(b)
    if blocks and blocks[0].is_cuda:
        torch.cuda.synchronize()
    del blocks


# ---- persisting L2 (CUDA driver API) -------------------------------------------------------
_CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
_CU_ACCESS_POLICY_WINDOW = 1


class CudaL2:
    """Persisting-L2 controls through libcuda (torch exposes none of them). Every call degrades to
    a no-op where the driver or the API is missing (CPU, ROCm, pre-Ampere GPUs)."""

    def __init__(self) -> None:
        self.lib = None
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError:
            return

    def limit(self) -> int | None:
        if self.lib is None:
            return None
        v = ctypes.c_size_t(0)
        rc = self.lib.cuCtxGetLimit(ctypes.byref(v), _CU_LIMIT_PERSISTING_L2_CACHE_SIZE)
        return int(v.value) if rc == 0 else None

    def window_bytes(self, stream_handle: int) -> int | None:
        """num_bytes of the access-policy window on a stream (offset 8 of the attribute union)."""
        if self.lib is None:
            return None
        buf = (ctypes.c_ubyte * 64)()
        rc = self.lib.cuStreamGetAttribute(ctypes.c_void_p(stream_handle), _CU_ACCESS_POLICY_WINDOW,
                                           ctypes.byref(buf))
        return int(ctypes.c_size_t.from_buffer(buf, 8).value) if rc == 0 else None

    def reset(self, stream_handle: int | None = None) -> None:
        """Drop persisting lines and the carve-out; clear a stream's access-policy window."""
        if self.lib is None:
            return
        self.lib.cuCtxSetLimit(_CU_LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(0))
        self.lib.cuCtxResetPersistingL2Cache()
        if stream_handle is not None:
            buf = (ctypes.c_ubyte * 64)()
            self.lib.cuStreamSetAttribute(ctypes.c_void_p(stream_handle), _CU_ACCESS_POLICY_WINDOW,
                                          ctypes.byref(buf))

"""Process-wide hook registries: tables of callbacks that run inside *other* code (reward hack #21).

Standalone (stdlib + torch), loaded by ``process_state`` beside the harness before any candidate
code runs; its entries join ``process_state.SWITCHES`` and are handled exactly like the switches
there: snapshotted before the candidate is imported, put back to that snapshot around every
reference call, and any change named in a ``hack_suspected`` diagnosis.

Why they matter: the reference and the candidate share one process, and a hook registered in one
of these tables runs inside the *reference's* calls too. A process-wide module forward hook that
burns CPU only when a module named ``Model`` runs makes a candidate that computes exactly what the
reference computes read as a speedup of the size of the tax; a gc callback, a signal timer, an
audit hook or a trace function does the same with any code that triggers it. Seen on a user's
MLP problem: such a candidate passed every hack check and was stopped only by the noise gates.

Each registry is a (getter, setter) pair. The getter returns an ``Entries`` value, which compares
by the *identity* of the registered callables (a hook object replaced by an equal-looking one is a
change) and prints the callables' names, so a diagnosis reads
``module forward hooks (register_module_forward_hook): [] -> [_tax]``. A setter of ``None`` means
the table cannot be put back from outside (a running profiler, audit hooks, which Python never
removes): those are only flagged, which is enough because the harness checks after every
candidate call and every timed candidate sample, before the reference runs again. ``ISOLATED``
tables are put back for the reference but not flagged: libraries change them legitimately
(``torch.compile`` imports setuptools, whose import finders join ``sys.meta_path``, and adds
warning filters).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import warnings

import torch


class Entries:
    """A registry's content at one moment: ``items``, its (key, callable) pairs, compared by
    identity (a table object among them makes rebinding the table a change too); ``extra``
    travels with the value for the setter but is not compared."""

    __slots__ = ("items", "extra")

    def __init__(self, items, extra=None) -> None:  # type: ignore[no-untyped-def]
        self.items, self.extra = tuple(items), extra

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Entries) or len(self.items) != len(other.items):
            return False
        return all(ka == kb and (va is vb or (type(va) in _PLAIN and va == vb))
                   for (ka, va), (kb, vb) in zip(self.items, other.items))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        """The registered callables by name; defaults (no handler, an empty slot, the table
        object itself) are left out, so a diagnosis shows what was added."""
        shown = [_label(k, v) for k, v in self.items]
        return "[" + ", ".join(s for s in shown if s) + "]"


_PLAIN = (bool, int, float, str, tuple, type(None))
_DEFAULTS = (signal.default_int_handler, signal.SIG_DFL, signal.SIG_IGN)


def _label(key, obj) -> str:  # type: ignore[no-untyped-def]
    if obj is None or isinstance(obj, dict) or any(obj is d for d in _DEFAULTS):
        return ""
    if isinstance(key, int) and key > 0 and not isinstance(obj, _PLAIN):  # a signal number
        try:
            return f"{signal.Signals(key).name}={_name(obj)}"
        except ValueError:
            pass
    return repr(obj) if isinstance(obj, _PLAIN) else _name(obj)


def _name(obj) -> str:  # type: ignore[no-untyped-def]
    fn = getattr(obj, "func", obj)  # functools.partial
    fn = getattr(fn, "__func__", fn)  # bound methods
    return str(getattr(fn, "__qualname__", None) or type(fn).__name__)


# ---- torch.nn.modules.module: the module-level hook tables ----------------------------------
# ``Module._call_impl`` reads these module globals on every call of every module; any entry turns
# off its fast path and runs the hook inside the reference's forward. State-dict hooks have no
# process-wide table in torch (only per module, and the reference instance is the harness's).
_MODULE = torch.nn.modules.module
_TORCH_TABLES = {
    "module forward pre-hooks (register_module_forward_pre_hook)": ("_global_forward_pre_hooks",),
    "module forward hooks (register_module_forward_hook)": (
        "_global_forward_hooks", "_global_forward_hooks_with_kwargs", "_global_forward_hooks_always_called"),
    "module backward hooks (register_module_full_backward_hook, register_module_backward_hook)": (
        "_global_backward_hooks", "_global_is_full_backward_hook"),
    "module backward pre-hooks (register_module_full_backward_pre_hook)": ("_global_backward_pre_hooks",),
    "module registration hooks (register_module_module_registration_hook)": ("_global_module_registration_hooks",),
    "buffer registration hooks (register_module_buffer_registration_hook)": ("_global_buffer_registration_hooks",),
    "parameter registration hooks (register_module_parameter_registration_hook)": (
        "_global_parameter_registration_hooks",),
}


def _torch_table(names: tuple) -> tuple:
    names = tuple(n for n in names if hasattr(_MODULE, n))  # a table this torch build lacks: none

    def get() -> Entries:
        items = []
        for n in names:
            table = getattr(_MODULE, n)
            if isinstance(table, dict):
                items += [((n, k), v) for k, v in table.items()]
                items.append(((n, "table"), table))  # rebinding the global is a change too
            else:
                items.append(((n, "value"), table))
        return Entries(items, {n: getattr(_MODULE, n) for n in names})

    def put(value: Entries) -> None:
        # the same table objects, refilled in place: handles the candidate holds stay valid
        contents: dict = {}
        for (n, k), v in value.items:
            if k not in ("table", "value"):
                contents.setdefault(n, []).append((k, v))
        for n, table in value.extra.items():
            setattr(_MODULE, n, table)
            if isinstance(table, dict):
                table.clear()
                table.update(contents.get(n, []))

    return get, put


# ---- torch: callbacks that every frame or operator consults --------------------------------
def _eval_frame() -> tuple:
    """Dynamo's PEP 523 frame-evaluation callback: left set outside a compiled call, it runs on
    every Python frame the reference executes (and may compile the reference)."""
    ef = torch._C._dynamo.eval_frame
    return (lambda: Entries([("callback", ef.get_eval_frame_callback())]),
            lambda v: ef.set_eval_frame(v.items[0][1]))


def _one(get) -> tuple:  # type: ignore[no-untyped-def]
    """A getter of one object (None when unset) as a flag-only registry."""
    return (lambda: Entries([("", get())]), None)


# ---- the interpreter -----------------------------------------------------------------------
def _library_roots() -> tuple[str, ...]:
    """Where installed code lives (the interpreter's prefixes, the standard library, every
    site-packages): an audit hook asked for from a file under one of these is a library's."""
    import site
    import sysconfig

    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    roots.update(sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib"))
    try:
        roots.update(site.getsitepackages())
    except AttributeError:
        pass
    return tuple(sorted({os.path.realpath(r).rstrip(os.sep) + os.sep for r in roots if r and r != os.sep}))


def _audit_watch() -> list:
    """Audit hooks can be added but never removed, and there is no way to list them. So this
    module adds the first one itself, when it is loaded (before any candidate code), and that hook
    refuses every later ``sys.addaudithook`` (an exception derived from RuntimeError makes Python
    drop the new hook silently): no audit hook of anyone else ever runs. A plain closure,
    reachable from nothing the candidate can name.

    Each refusal is recorded with where it came from, the file of the Python frame that asked.
    Only requests from outside the installed libraries (the candidate's files, code it ``exec``-s)
    are the registry's value, so only they are flagged: a library asks legitimately — on an H100
    host (torch 2.11, Triton 3.6) every ``torch.compile`` candidate did, and flagging that rejected
    all of them as ``hack_suspected``. A candidate that disguises its request as a library file
    loses only the label: its hook is refused like any other."""
    refused: list = []
    roots = _library_roots()

    def watch(event: str, _args: tuple) -> None:
        if event == "sys.addaudithook":
            try:
                path = sys._getframe(1).f_code.co_filename  # who called sys.addaudithook (a C function)
            except ValueError:  # no Python frame at all: a C extension's own request
                path = ""
            library = not path or (not path.startswith("<") and os.path.realpath(path).startswith(roots))
            refused.append((path, library))
            raise RuntimeError("the Arbor harness refuses audit hooks")

    sys.addaudithook(watch)
    return refused


_AUDIT_REFUSED = _audit_watch()  # once per process: the harness loads this module once, by path


def refused_audit_hooks() -> list[tuple[str, bool]]:
    """Every refused ``sys.addaudithook`` in this process: (the asking file, from a library?)."""
    return list(_AUDIT_REFUSED)


def _signals() -> tuple:
    """Python-level signal handlers: with an interval timer (below) a handler interrupts whatever
    runs, and it is handed the interrupted frame, so it can tax only the reference's frames."""
    nums = sorted(int(s) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP))

    def get() -> Entries:
        return Entries([(n, signal.getsignal(n)) for n in nums])

    def put(value: Entries) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for n, handler in value.items:
            if handler is not None and signal.getsignal(n) is not handler:
                try:
                    signal.signal(n, handler)
                except (OSError, ValueError, TypeError):
                    continue

    return get, put


_TIMERS = tuple(getattr(signal, n) for n in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF") if hasattr(signal, n))


def _itimers() -> tuple:
    """Interval timers: compared by whether each runs and at which interval (the time left counts
    down, so it is carried for the setter only)."""
    def get() -> Entries:
        now = [(w, signal.getitimer(w)) for w in _TIMERS]
        return Entries([(w, (left > 0, interval) if left > 0 else None) for w, (left, interval) in now],
                       dict(now))

    def put(value: Entries) -> None:
        for w, (left, interval) in value.extra.items():
            signal.setitimer(w, left, interval)

    return get, put


def _gc_callbacks() -> tuple:
    """Run at the start and end of every collection, whichever code's allocation triggered it."""
    def put(value: Entries) -> None:
        gc.callbacks[:] = [v for _k, v in value.items]

    return (lambda: Entries(list(enumerate(gc.callbacks))), put)


def _attr_hooks(space, names: tuple) -> tuple:  # type: ignore[no-untyped-def]
    """Hooks that are plain attributes (``sys.excepthook``, ``warnings.showwarning``, ...)."""
    names = tuple(n for n in names if hasattr(space, n))

    def put(value: Entries) -> None:
        for n, v in value.items:
            setattr(space, n, v)

    return (lambda: Entries([(n, getattr(space, n)) for n in names]), put)


def _list(space, name: str) -> tuple:  # type: ignore[no-untyped-def]
    """A list the interpreter reads by name (``sys.meta_path``): refilled in place."""
    def put(value: Entries) -> None:
        table = getattr(space, name)
        table[:] = [v for _k, v in value.items]

    return (lambda: Entries(list(enumerate(getattr(space, name)))), put)


def _warning_filters() -> tuple:
    def put(value: Entries) -> None:
        warnings.filters[:] = [v for _k, v in value.items]
        warnings._filters_mutated()  # type: ignore[attr-defined]  # drop the per-module caches

    return (lambda: Entries(list(enumerate(warnings.filters))), put)


def _monitoring() -> dict:
    """sys.monitoring (Python >= 3.12): a tool registered with global events runs a callback on
    every instrumented event of every frame. Per tool: its name and global event set; a tool's
    events are switched off for the reference and back on after."""
    mon = getattr(sys, "monitoring", None)
    if mon is None:
        return {}

    def get() -> Entries:
        return Entries([(t, (mon.get_tool(t), mon.get_events(t))) for t in range(6)])

    def put(value: Entries) -> None:
        for t, (name, events) in value.items:
            if mon.get_tool(t) is not None and mon.get_tool(t) == name:
                mon.set_events(t, events)
            elif mon.get_tool(t) is not None:  # registered by the candidate: silenced
                mon.set_events(t, 0)

    return {"sys.monitoring tools (sys.monitoring.use_tool_id, set_events)": (get, put)}


def _thread_hook(kind: str) -> tuple:
    get = getattr(threading, f"get{kind}", None)
    if get is None:  # Python < 3.10
        return _one(lambda: getattr(threading, f"_{kind}_hook", None))
    return (lambda: Entries([("", get())]), lambda v: getattr(threading, f"set{kind}")(v.items[0][1]))


def _interpreter_hook(kind: str) -> tuple:
    """``sys.settrace`` / ``sys.setprofile`` of the thread that runs the reference (the harness's
    main thread: every model call is made there)."""
    get, set_ = getattr(sys, f"get{kind}"), getattr(sys, f"set{kind}")
    return (lambda: Entries([("", get())]), lambda v: set_(v.items[0][1]))


REGISTRIES: dict = {f"hooks: {name}": _torch_table(attrs) for name, attrs in _TORCH_TABLES.items()}


def _add(name: str, make) -> None:  # type: ignore[no-untyped-def]
    """A registry whose API this torch/Python build lacks is left out, as for the switches."""
    try:
        REGISTRIES[f"hooks: {name}"] = make()
    except (AttributeError, TypeError, ImportError):
        pass


_add("dynamo frame evaluation callback (torch._C._dynamo.eval_frame.set_eval_frame)", _eval_frame)
_add("autograd saved-tensor hooks (torch.autograd.graph.saved_tensors_hooks)",
     lambda: _one(lambda: torch._C._autograd._top_saved_tensors_default_hooks(False)))
_add("autograd profiler running (torch.profiler.profile, torch.autograd.profiler.profile)",
     lambda: _one(torch._C._autograd._profiler_enabled))
_add("JIT tracer state (torch.jit.trace)", lambda: (
    lambda: Entries([("", torch._C._get_tracing_state())]),
    lambda v: torch._C._set_tracing_state(v.items[0][1])))
_add("functorch transform levels (vmap, grad, jvp left entered)",
     lambda: _one(lambda: None if torch._C._functorch.peek_interpreter_stack() is None else "entered"))
_add("trace function (sys.settrace)", lambda: _interpreter_hook("trace"))
_add("profile function (sys.setprofile)", lambda: _interpreter_hook("profile"))
_add("trace function of new threads (threading.settrace)", lambda: _thread_hook("trace"))
_add("profile function of new threads (threading.setprofile)", lambda: _thread_hook("profile"))
# the value names the files that asked, so a flag says who (a library's generated code would show here)
_add("audit hooks (sys.addaudithook)", lambda: _one(
    lambda: tuple(os.path.basename(p) or p for p, lib in _AUDIT_REFUSED if not lib) or None))
_add("gc callbacks (gc.callbacks)", _gc_callbacks)
_add("signal handlers (signal.signal)", _signals)
_add("interval timers (signal.setitimer)", _itimers)
_add("exception hooks (sys.excepthook, sys.unraisablehook, threading.excepthook)", lambda: (
    lambda: Entries([("sys", sys.excepthook), ("unraisable", sys.unraisablehook),
                           ("threading", threading.excepthook)]),
    lambda v: [setattr(sys, "excepthook", v.items[0][1]), setattr(sys, "unraisablehook", v.items[1][1]),
               setattr(threading, "excepthook", v.items[2][1])]))
REGISTRIES.update({f"hooks: {k}": v for k, v in _monitoring().items()})
# put back for the reference, not flagged: libraries change these on import (see the docstring)
_ISOLATED = {
    "import finders (sys.meta_path)": _list(sys, "meta_path"),
    "path hooks (sys.path_hooks)": _list(sys, "path_hooks"),
    "warning filters (warnings.filters)": _warning_filters(),
    "warning display (warnings.showwarning)": _attr_hooks(warnings, ("showwarning", "_showwarnmsg")),
}
REGISTRIES.update({f"hooks: {k}": v for k, v in _ISOLATED.items()})
ISOLATED = frozenset(f"hooks: {k}" for k in _ISOLATED)

# Scalar switches found by the same scan: each makes every operator of the reference slower.
SWITCHES = {
    "warn_always": (torch.is_warn_always_enabled, torch.set_warn_always),
    "anomaly_enabled": (torch.is_anomaly_enabled,
                        lambda v: torch.set_anomaly_enabled(v, torch.is_anomaly_check_nan_enabled())),
    "anomaly_check_nan": (torch.is_anomaly_check_nan_enabled,
                          lambda v: torch.set_anomaly_enabled(torch.is_anomaly_enabled(), v)),
    "forward_ad_enabled": (torch._C._is_fwd_grad_enabled, torch._C._set_fwd_grad_enabled),
    "check_sparse_invariants": (torch.sparse.check_sparse_tensor_invariants.is_enabled,
                                torch._C._set_check_sparse_tensor_invariants),
}
# Dispatch keys included/excluded in the thread's TLS (``torch._C._IncludeDispatchKeyGuard`` left
# entered): every operator dispatches through them. Flag-only; autocast and inference mode show
# here too, after their own switches (named first, alphabetically).
for _key, _get in (("dispatch_tls_included", "_dispatch_tls_local_include_set"),
                   ("dispatch_tls_excluded", "_dispatch_tls_local_exclude_set")):
    if hasattr(torch._C, _get):
        SWITCHES[_key] = (lambda g=getattr(torch._C, _get): str(g()), None)

"""Process-wide state the candidate sets never reaches the reference: the harness runs every
reference call under the state it snapshotted before the candidate was imported. The thread count
is the candidate's to choose (``set_threads`` is one of Arbor's own moves), so it is isolated
rather than flagged: here a reference whose output *is* its thread count proves which one it ran with."""

from __future__ import annotations

from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernels
from arbor.sandbox.runners.local import LocalRunner

from .corpus import FAST

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * float(torch.get_num_threads())


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return []
'''

ONE_THREAD = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        torch.set_num_threads(1)

    def forward(self, x):
        return x * {threads}
'''


def test_reference_runs_with_the_campaigns_threads_whatever_the_candidate_set():
    ok, wrong = measure_kernels(LocalRunner(), [
        KernelRequest(PROBLEM, ONE_THREAD.format(threads="2.0"), **{**FAST, "num_threads": 2}),
        KernelRequest(PROBLEM, ONE_THREAD.format(threads="1.0"), **{**FAST, "num_threads": 2}),
    ])
    assert (ok.status, ok.error_class) == ("ok", None), ok.error_text
    assert wrong.error_class == "incorrect", wrong.error_text


ALLOCATOR = '''
import os, sys
import torch
sys.path.insert(0, {harness!r})
import process_state as ps

guard = ps.StateGuard()
assert not torch.cuda.is_initialized(), "capturing the allocator state started CUDA"
torch._C._accelerator_setAllocatorSettings("garbage_collection_threshold:0.01")
os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
torch._C._set_default_mobile_cpu_allocator()
flagged = guard.flagged()
with guard.reference():
    inside = ps.changes(guard.pristine, ps.capture())
del torch._C._accelerator_getAllocatorSettings  # a torch build without the API
fresh = ps.StateGuard()
print(repr((flagged, inside, "allocator_settings" in fresh.pristine, fresh.flagged())))
'''


def test_allocator_settings_are_flagged_by_name_and_kept_from_the_reference():
    """Allocator behaviour is process-wide: a candidate that changes it (settings, the allocator's
    environment variables, the CPU allocator itself) is named, the reference runs under the
    settings it had, and a torch build lacking a getter only drops that switch."""
    import subprocess
    import sys
    from pathlib import Path

    harness = str(Path(__file__).parents[2] / "sandbox" / "harness")
    out = subprocess.run([sys.executable, "-c", ALLOCATOR.format(harness=harness)], capture_output=True,
                         text=True, timeout=120, env={k: v for k, v in __import__("os").environ.items()
                                                      if "ALLOC_CONF" not in k})
    assert out.returncode == 0, out.stderr
    flagged, inside, still_there, rest = eval(out.stdout)
    assert [f.split(":")[0] for f in flagged] == ["allocator_settings", "cpu_mobile_allocator",
                                                 "env PYTORCH_CUDA_ALLOC_CONF"], flagged
    assert inside == []
    assert not still_there and rest == []


REGISTRIES = '''
import gc, signal, sys, threading, time, warnings
import torch
sys.path.insert(0, {harness!r})
{prelude}
import process_state as ps

names = [n for n in ps.SWITCHES if n.startswith("hooks: ")]
guard = ps.StateGuard()
assert guard.flagged() == [], guard.flagged()
M = torch.nn.modules.module
tax = lambda *a: None
M.register_module_forward_pre_hook(tax)
M.register_module_forward_hook(tax, with_kwargs=True)
M.register_module_full_backward_hook(tax)
M.register_module_full_backward_pre_hook(tax)
M.register_module_module_registration_hook(tax)
M.register_module_buffer_registration_hook(tax)
M.register_module_parameter_registration_hook(tax)
gc.callbacks.append(tax)
signal.signal(signal.SIGPROF, tax)
signal.setitimer(signal.ITIMER_PROF, 5.0, 5.0)
sys.excepthook = tax
threading.settrace(tax)
threading.setprofile(tax)
sys.addaudithook(tax)
sys.meta_path.append(object())
warnings.simplefilter("always")
torch._C._dynamo.eval_frame.set_eval_frame(False)  # dynamo's run-only mode, outside any compiled call
torch.set_warn_always(True)
flagged = [n for f in guard.flagged() for n in ps.SWITCHES if f.startswith(n + ": ")]
with guard.reference():
    inside = [n for f in ps.changes(guard.pristine, ps.capture(), frozenset()) for n in ps.SWITCHES
              if f.startswith(n + ": ")]
    timers = signal.getitimer(signal.ITIMER_PROF)
    hooks_inside = (len(M._global_forward_pre_hooks), len(gc.callbacks), len(warnings.filters))
torch._C._dynamo.eval_frame.set_eval_frame(None)
after = (len(M._global_forward_pre_hooks), len(gc.callbacks), signal.getitimer(signal.ITIMER_PROF)[1])
# a thread that registers a hook while the reference runs: caught as the reference call ends
clean = ps.StateGuard()
def late():
    time.sleep(0.05)
    M.register_module_forward_pre_hook(tax)
with clean.reference():
    threading.Thread(target=late).start()
    time.sleep(0.2)
print(repr((sorted(names), sorted(set(flagged)), inside, timers, hooks_inside, after, clean.during)))
'''


def _registries(prelude: str = "") -> tuple:
    import subprocess
    import sys
    from pathlib import Path

    harness = str(Path(__file__).parents[2] / "sandbox" / "harness")
    out = subprocess.run([sys.executable, "-c", REGISTRIES.format(harness=harness, prelude=prelude)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return eval(out.stdout.strip().splitlines()[-1])


def test_every_hook_registry_is_flagged_by_name_and_emptied_for_the_reference():
    """Issue 27: a process-wide hook runs inside the reference's calls too. Each registry a
    candidate writes to is named; inside ``StateGuard.reference`` every one that can be put back
    is at its snapshot (only the audit hook is left: Python never removes one; the harness refused
    it and flags the attempt), and the candidate's entries come back after."""
    names, flagged, inside, timers, hooks_inside, after, during = _registries()
    expected = {
        "hooks: module forward pre-hooks (register_module_forward_pre_hook)",
        "hooks: module forward hooks (register_module_forward_hook)",
        "hooks: module backward hooks (register_module_full_backward_hook, register_module_backward_hook)",
        "hooks: module backward pre-hooks (register_module_full_backward_pre_hook)",
        "hooks: module registration hooks (register_module_module_registration_hook)",
        "hooks: buffer registration hooks (register_module_buffer_registration_hook)",
        "hooks: parameter registration hooks (register_module_parameter_registration_hook)",
        "hooks: gc callbacks (gc.callbacks)", "hooks: signal handlers (signal.signal)",
        "hooks: interval timers (signal.setitimer)",
        "hooks: exception hooks (sys.excepthook, sys.unraisablehook, threading.excepthook)",
        "hooks: trace function of new threads (threading.settrace)",
        "hooks: profile function of new threads (threading.setprofile)",
        "hooks: audit hooks (sys.addaudithook)",
        "hooks: dynamo frame evaluation callback (torch._C._dynamo.eval_frame.set_eval_frame)",
        "warn_always",
    }
    assert expected <= set(flagged), sorted(expected - set(flagged))
    # libraries change these on import (torch.compile: setuptools' finders, warning filters):
    # put back for the reference, never flagged
    assert not any("sys.meta_path" in f or "warnings" in f for f in flagged), flagged
    assert {n for n in names if "sys.meta_path" in n or "warning filters" in n}
    assert inside == ["hooks: audit hooks (sys.addaudithook)"], inside
    assert timers == (0.0, 0.0)
    assert hooks_inside[:2] == (0, 0)
    assert after[:2] == (1, 1) and after[2] == 5.0
    assert during and "module forward pre-hooks" in during[0], during


MONITORING = '''
import types
class _Mon:
    def __init__(self):
        self.tools, self.events = {2: "cProfile"}, {2: 1}
    def get_tool(self, t): return self.tools.get(t)
    def use_tool_id(self, t, name): self.tools[t] = name
    def get_events(self, t): return self.events.get(t, 0)
    def set_events(self, t, ev): self.events[t] = ev
sys.monitoring = _Mon()
'''


def test_sys_monitoring_tools_are_a_registry_too():
    """Python >= 3.12 (this machine runs 3.11, so ``sys.monitoring`` is a fake that keeps the
    documented get_tool/use_tool_id/get_events/set_events contract): a tool the candidate
    registers is flagged and silenced for the reference; the pristine tools keep their events."""
    harness = str(__import__("pathlib").Path(__file__).parents[2] / "sandbox" / "harness")
    import subprocess
    import sys

    code = f'''
import sys
sys.path.insert(0, {harness!r})
{MONITORING}
import process_state as ps
guard = ps.StateGuard()
sys.monitoring.use_tool_id(3, "tax")
sys.monitoring.set_events(3, 0xFFFF)
flagged = guard.flagged()
with guard.reference():
    inside = dict(sys.monitoring.events)
print(repr((flagged, inside, dict(sys.monitoring.events))))
'''
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    flagged, inside, after = eval(out.stdout.strip().splitlines()[-1])
    assert [f.split(":")[1].strip() for f in flagged] == ["sys.monitoring tools (sys.monitoring.use_tool_id, set_events)"]
    assert inside == {2: 1, 3: 0} and after == {2: 1, 3: 0xFFFF}


LIBRARY_AUDIT = '''
import os, site, sys
sys.path.insert(0, {harness!r})
import process_state as ps
guard = ps.StateGuard()
seen = []
lib = os.path.join(site.getsitepackages()[0], "some_library", "runtime.py")
exec(compile("import sys\\nsys.addaudithook(lambda e, a: seen.append(e))", lib, "exec"), {{"seen": seen}})
from_library = guard.flagged()
sys.addaudithook(lambda e, a: seen.append(e))
sys.audit("arbor.test")
print(repr((from_library, guard.flagged(), seen, ps.registries.refused_audit_hooks())))
'''


def test_an_audit_hook_is_refused_and_flagged_only_when_the_candidate_asks():
    """A library's request (torch.compile on an H100 host made one) is refused but not flagged;
    the candidate's own is refused and named. Neither hook ever sees an event."""
    import subprocess
    import sys
    from pathlib import Path

    harness = str(Path(__file__).parents[2] / "sandbox" / "harness")
    out = subprocess.run([sys.executable, "-c", LIBRARY_AUDIT.format(harness=harness)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    from_library, from_candidate, seen, refused = eval(out.stdout.strip().splitlines()[-1])
    assert from_library == [] and seen == []
    assert [f for f in from_candidate if "audit hooks" in f] and len(from_candidate) == 1, from_candidate
    assert [lib for _path, lib in refused] == [True, False], refused

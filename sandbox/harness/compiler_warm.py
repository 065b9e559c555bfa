"""Dynamo and Inductor imported ahead, in a warm worker, for the compiled jobs forked from it.

A ``torch.compile`` candidate's job spends ~2.5 s importing Dynamo, AOT autograd and Inductor and
computing the keys Inductor's caches hash in (a digest of torch's ~3,000 source files; the
system's) — half of a 5 s measurement whose compiled code comes from the cache. A warm worker
(``sandbox/runners/warm_worker.py``) can do that once, before it forks the first compiled job
(``kernel_harness.warm_compiler``, the ``compiler`` extra of ``PythonEntry.extras``).

What a forked child must not inherit is anything those imports computed from the worker's own
environment: a module-level path under the worker's temp folder (torch 2.13: Inductor's
precompiled-header folder, ``codecache._HEADER_DIR``, is ``tempfile.gettempdir()`` at import) would
point every job at a folder its sandbox may not write, or at one it would share. So the imports run
with ``TMPDIR``, ``HOME`` and the cache-folder variables pointed at *sentinel* folders of unique
names; afterwards every loaded module's globals are searched for those names. A string (or path)
global, or a string in a global dict, that contains the temp or home sentinel is recorded and
rebound in each job to the same expression of the job's own folders (``rebind``). Anything else
that captured a sentinel — a cache folder, a list, a nested value — cannot be rebound safely: the
warm-up then reports the worker unsafe, the runner kills it, and compiled jobs import Inductor
themselves (slower, never wrong). ``tests/sandbox/test_compiler_warm.py``

STANDALONE (stdlib + torch), loaded by path like the harness's other modules.
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import tempfile
import time
import types
from pathlib import PurePath

# the variables whose values a job sees differently from the worker; only the first two can be
# rebound (a cache folder captured at import would be shared between jobs)
_VARS = ("TMPDIR", "HOME", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
_REBINDABLE = ("TMPDIR", "HOME")


class Warmed:
    """What ``warm`` did: its seconds, and the globals to rebind in each job."""

    def __init__(self, seconds: float, sentinels: dict[str, str], leaks: list[tuple]) -> None:
        self.seconds, self.sentinels, self.leaks = seconds, sentinels, leaks

    def rebind(self) -> int:
        """In the job (its environment set): each recorded global gets the value it would have
        had, had the job imported it. Returns how many were rebound."""
        tempfile.tempdir = None
        actual = {"TMPDIR": tempfile.gettempdir(), "HOME": os.environ.get("HOME", "")}
        for module_name, attr, key, template in self.leaks:
            module = sys.modules.get(module_name)
            if module is None:
                continue
            text = str(template)
            for var in _REBINDABLE:
                text = text.replace(self.sentinels[var], actual[var])
            value = type(template)(text) if isinstance(template, PurePath) else text
            holder = vars(module)
            if key is None:
                holder[attr] = value
            elif type(holder.get(attr)) is dict:
                holder[attr][key] = value
        return len(self.leaks)


def warm(torch) -> Warmed:  # type: ignore[no-untyped-def]
    """Import the compiler with sentinel folders and search what it captured. Raises
    ``RuntimeError`` naming the first global that cannot be rebound (the worker is unfit)."""
    t0 = time.perf_counter()
    base = tempfile.mkdtemp(prefix="arbor-compiler-warm-")
    sentinels = {var: os.path.join(base, f"sentinel-{var.lower()}") for var in _VARS}
    for path in sentinels.values():
        os.makedirs(path)
    saved = {var: os.environ.get(var) for var in _VARS}
    os.environ.update(sentinels)
    tempfile.tempdir = None
    try:
        import torch._dynamo  # noqa: F401,PLC0415
        import torch._functorch.aot_autograd  # noqa: F401,PLC0415
        import torch._inductor.compile_fx  # noqa: F401,PLC0415
        import torch._inductor.graph  # noqa: F401,PLC0415
        from torch._inductor import codecache  # noqa: PLC0415

        codecache.torch_key()
        if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
            # on a GPU build this would initialise the device, which a forked child cannot use
            codecache.CacheBase.get_system()
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
        tempfile.tempdir = None
        shutil.rmtree(base, ignore_errors=True)
    leaks, unfit = captured(sentinels)
    if unfit:
        raise RuntimeError(f"the compiler's import captured a job-specific folder where it cannot be "
                           f"rebound: {unfit}")
    gc.freeze()
    return Warmed(time.perf_counter() - t0, sentinels, leaks)


_SEQUENCES = (list, tuple, set, frozenset)


def captured(sentinels: dict[str, str]) -> tuple[list[tuple], str | None]:
    """Every module global holding a sentinel: (rebindable leaks, the first unfit one or None).
    Looks at values by type only (never ``isinstance`` or ``getattr``: a module's lazy or
    deprecated attributes must not run)."""

    def which(value) -> str | None:  # type: ignore[no-untyped-def]
        if type(value) is str or issubclass(type(value), PurePath):
            text = str(value)
            return next((var for var, s in sentinels.items() if s in text), None)
        return None

    leaks: list[tuple] = []
    for module_name, module in list(sys.modules.items()):
        if not issubclass(type(module), types.ModuleType):
            continue
        for attr, key, value in _slots(vars(module)):
            where = f"{module_name}.{attr}" + ("" if key is None else f"[{key!r}]")
            var = which(value)
            if var is not None:
                if var not in _REBINDABLE:
                    return leaks, f"{where} ({var})"
                leaks.append((module_name, attr, key, value))
            # a global dict's own items are slots of their own; anything deeper cannot be rebound
            elif type(value) in (_SEQUENCES if key is None else (*_SEQUENCES, dict)) and _nested(value, which):
                return leaks, f"{where} (inside a container)"
    return leaks, None


def _slots(holder: dict):  # type: ignore[no-untyped-def]
    """(attr, None, value) for each global, and (attr, key, item) for each item of a global dict:
    the places ``Warmed.rebind`` can set."""
    for attr, value in list(holder.items()):
        yield attr, None, value
        if type(value) is dict:
            for key, item in list(value.items()):
                yield attr, key, item


def _nested(value, which, depth: int = 0) -> bool:  # type: ignore[no-untyped-def]
    items = value.items() if type(value) is dict else ((None, v) for v in value)
    for _k, v in items:
        if which(v) is not None:
            return True
        if depth < 2 and type(v) in (*_SEQUENCES, dict) and _nested(v, which, depth + 1):
            return True
    return False

"""A ``load_inline`` candidate's built C++ extension, kept with the rest of its compiled code.

Part of the job's compile cache (``compile_cache.py``, which calls it while activating the cache
folder): a candidate that builds an extension when it is imported pays ~25 s of the compiler in
every measurement process, and torch's own reuse does not survive a new job. Kept apart because it
is a different mechanism — a wrapper around ``torch.utils.cpp_extension.load_inline`` installed
before the candidate is imported — where the rest of the cache only points Inductor and Triton at
a folder and packs it.

STANDALONE (stdlib, and torch only once the job imported it): shipped beside the harnesses and
loaded by path by ``compile_cache.py``.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys

__all__ = ["builds_extensions", "cache_extensions"]

EXTENSION_CALL = re.compile(r"load_inline|cpp_extension")  # the host's uses_extension (this file is standalone)


def builds_extensions(candidate_path: str) -> bool:
    """Whether the candidate's source names ``load_inline``: only then is the wrapper installed
    (importing ``torch.utils.cpp_extension`` brings setuptools, 0.12 s a job, which a
    ``torch.compile`` candidate's cached measurement of ~3.6 s need not pay)."""
    try:
        with open(candidate_path, encoding="utf-8", errors="replace") as f:
            return bool(EXTENSION_CALL.search(f.read()))
    except OSError:
        return False


def cache_extensions(folder: str) -> dict:
    """Keep a ``load_inline`` candidate's built extension with the rest of its compiled code.

    Such a candidate builds a C++ extension when it is imported (~25 s of the compiler), in every
    measurement process. Torch's own reuse does not survive a new job: its version bookkeeping is
    per process, so every process runs ninja, and ninja rebuilds because the build files name the
    job's folder, a new one each time. So ``load_inline`` is wrapped, here in the job before the
    candidate is imported: a call without a ``build_directory`` of its own builds into
    ``folder/<digest of every argument that shapes the binary>`` (packed with the archive), and a
    later job of the same candidate that finds ``<name>.so`` there imports it instead of building.
    Only the candidate's own calls can reach it, and its archive is its own (the host's key);
    the reference never compiles where the cache is on. Returns counters the wrapper updates."""
    counts = {"built": 0, "loaded": 0}
    cpp = sys.modules.get("torch.utils.cpp_extension")
    if "torch" not in sys.modules:
        return counts
    try:
        import importlib.util  # noqa: PLC0415
        import inspect  # noqa: PLC0415

        if cpp is None:
            import torch.utils.cpp_extension as cpp  # noqa: PLC0415
        real = cpp.load_inline
        signature = inspect.signature(real)
    except Exception:  # noqa: BLE001 - another torch: the candidate builds as before
        return counts
    if getattr(real, "_arbor_cached", False):
        return counts

    def load_inline(*args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return real(*args, **kwargs)
        a = bound.arguments
        if a.get("build_directory") or a.get("is_python_module", True) is not True or a["name"] in sys.modules:
            return real(*args, **kwargs)
        shaping = {k: v for k, v in a.items() if k not in ("verbose", "build_directory")}
        digest = hashlib.sha256(repr(sorted(shaping.items())).encode()).hexdigest()[:24]
        where = os.path.join(folder, digest)
        library = os.path.join(where, f"{a['name']}.so")
        done = os.path.join(where, "arbor-built")
        if os.path.isfile(library) and os.path.isfile(done):
            spec = importlib.util.spec_from_file_location(a["name"], library)
            if spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                counts["loaded"] += 1
                return module
        os.makedirs(where, exist_ok=True)
        bound.arguments["build_directory"] = where
        module = real(*bound.args, **bound.kwargs)
        with open(done, "w", encoding="ascii") as f:
            f.write(a["name"])
        counts["built"] += 1
        return module

    load_inline._arbor_cached = True  # type: ignore[attr-defined]
    cpp.load_inline = load_inline
    return counts

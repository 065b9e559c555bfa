"""The generated C++ kernel's schedule: the knobs a kernel engineer tunes, and ``cpp_schedule``,
the move that sets them on a candidate that already holds a generated kernel.

``cpp_codegen`` writes one kernel; whether it beats ATen's vectorised kernel on this machine
depends on how it walks memory, not on what it computes. The kernel therefore reads its schedule
from ``#define`` lines at the top of its source (``header``), and every variant is written in
the kernel behind them (``source.py``): the compiler drops what a point does not use. A schedule
point is then a pure rewrite of those lines in a generated candidate, so each point is a child
of the node it refines (docs/architecture.md#skills), its extension named by its own text.

Knobs (``KNOBS``; the kernel lists the ones it reads in its ``ARBOR_KNOBS`` line):

- ``unroll``: 1 turns on GCC's unroller with variable expansion (up to 8x, split accumulators for
  the reductions: a sum's add latency no longer serialises the pass); 0 leaves it to ``-O3``.
- ``block``: elements computed into an L1 buffer before they are stored (0: stored in the loop);
  in column mode, a task's lanes (``column.py``).
  Needed by the two below: a vectorised loop cannot choose its store instruction.
- ``stream``: the buffer is written with non-temporal stores (the widest the compiler targets:
  AVX-512, AVX or SSE intrinsics, chosen by the preprocessor from ``-march=native``): no
  read-for-ownership of lines the kernel overwrites, and no eviction of its inputs. Always, not
  only past the last-level cache: what the OS reports as that cache is not what a core gets (this
  VM's glibc reports the 256 MB of the whole EPYC package), and on the issue's AVX-512 VM a 16 MB
  ReLU output streamed ran 1.5-1.9x torch. The point is measured; the search decides.
- ``prefetch``: elements ahead of the block whose input lines are prefetched (0: none).
- ``lanes``: independent accumulators in each pass of a row reduction (``reduce.py``: split
  accumulators, so a reduction's vectors do not wait on each other; 0: one ``omp simd``
  reduction). Read by row-mode kernels only.
- ``erf``: 1 computes ``erf`` as a rational function without ``exp`` (``math.py``: max abs
  error 4.3e-7, the A&S form's is 5e-7); 0, Abramowitz & Stegun with an ``exp``. Read only by
  kernels that call ``erf``.

- ``onepass``: 1 folds a row normalisation's variance pass into its mean's pass (``onepass.py``:
  shifted sums, the row read twice instead of three times; nn.LayerNorm over 4 MB rows 1.22x torch
  against 1.08x, benchmarks/results/cpp_schedule_points.json); 0, a pass of its own. Read only by
  kernels with a centred sum of squares.

Knobs not set by a point keep their defaults (``DEFAULTS``, with its mode's ``MODE_DEFAULTS``: the
kernel ``cpp_codegen`` writes), so a point is absolute and the same point reached from two
parents is one artifact.
"""

from __future__ import annotations

import ast
import re

from ..base import register
from .names import SOURCE, extension_name

KNOBS = ("unroll", "block", "stream", "prefetch", "lanes", "erf", "onepass")
# the point ``cpp_codegen`` writes: the best measured, since a campaign may have no budget left for
# another build (side by side on the development machine, one thread, load 4.4, as a campaign's
# harness runs it: softmax 1.47x torch at lanes 64 against 1.32x without; GELU 1.58x with the
# rational erf against 0.85x: benchmarks/results/cpp_schedule_points.json)
DEFAULTS = {"unroll": 0, "block": 0, "stream": 0, "prefetch": 0, "lanes": 64, "erf": 1, "onepass": 1}
# a mode's own point where another measured best, side by side (one thread, load 0.9, inputs
# rotated through 128 MB): a column normalisation (``column.py``: RMSNorm over 64 channels of
# 128x128) at 256 lanes, streamed, prefetched one block ahead and unrolled ran 5.3 ms against
# 9.2 ms at the global defaults (1024 lanes stored in place; eager 14.9 ms, compile 11.0 ms). A
# column reduction (no full output: the sum over dim 1 of 64x256x256) keeps the global ones:
# 2.4 ms against 3.6 ms at that point.
MODE_DEFAULTS = {"column": {"unroll": 1, "block": 256, "stream": 1, "prefetch": 256}}
VALUES = {"unroll": (0, 1), "block": (0, 256, 512, 1024, 4096, 16384), "stream": (0, 1),
          "prefetch": (0, 256, 1024, 4096),
          "lanes": (0, 16, 32, 64), "erf": (0, 1), "onepass": (0, 1)}
_LINE = re.compile(r"^#define ARBOR_(UNROLL|BLOCK|STREAM|PREFETCH|LANES|ERF|ONEPASS) (\d+)$", re.M)
_KNOBS_LINE = re.compile(r"^// ARBOR_KNOBS: ([a-z ]*)$", re.M)
_DEFAULTS_LINE = re.compile(r"^// ARBOR_DEFAULTS: ([a-z0-9= ]*)$", re.M)


def validate(params: dict) -> None:
    unknown = set(params) - set(KNOBS)
    if unknown:
        raise ValueError(f"unknown params {sorted(unknown)}; cpp_schedule takes {', '.join(KNOBS)}")
    for knob, value in params.items():
        if value not in VALUES[knob]:
            raise ValueError(f"{knob} must be one of {VALUES[knob]}, got {value!r}")
    if needs_block(params) and params.get("block", 1) == 0:
        raise ValueError("stream and prefetch need a block (the buffer the stores and prefetches are issued for)")


def needs_block(point: dict) -> bool:
    """Whether ``point`` streams or prefetches: both are issued for a block. A point that leaves
    ``block`` unset takes the kernel's (a column kernel's default block is 256), so a point is
    checked whole against its kernel (``with_point``)."""
    return bool(point.get("stream") or point.get("prefetch"))


def header(knobs: tuple[str, ...], point: dict | None = None, defaults: dict | None = None) -> str:
    """The schedule lines a kernel reads (its defaults unless ``point`` says otherwise). A kernel
    whose mode has its own ``defaults`` (``MODE_DEFAULTS``) states them, so a point applied to it
    later starts from them (``defaults_of``)."""
    base = {**DEFAULTS, **(defaults or {})}
    point = {**base, **(point or {})}
    lines = [f"// ARBOR_KNOBS: {' '.join(knobs)}"]
    if defaults:
        lines.append(f"// ARBOR_DEFAULTS: {' '.join(f'{k}={int(v)}' for k, v in sorted(defaults.items()))}")
    lines += [f"#define ARBOR_{k.upper()} {int(point[k])}" for k in KNOBS]
    return "\n".join(lines) + "\n"


def defaults_of(kernel: str) -> dict:
    """The point a kernel's ``cpp_codegen`` wrote: ``DEFAULTS`` and its mode's own, if stated."""
    found = _DEFAULTS_LINE.search(kernel)
    own = dict(kv.split("=") for kv in found.group(1).split()) if found else {}
    return {**DEFAULTS, **{k: int(v) for k, v in own.items() if k in DEFAULTS}}


def read(kernel: str) -> tuple[tuple[str, ...], dict] | None:
    """(knobs the kernel reads, its schedule point), None for a kernel without a schedule."""
    knobs = _KNOBS_LINE.search(kernel)
    point = {m.group(1).lower(): int(m.group(2)) for m in _LINE.finditer(kernel)}
    if knobs is None or set(point) != set(KNOBS):
        return None
    return tuple(knobs.group(1).split()), point


# C++ the schedule needs: the knobs turned into code (kept apart from ``math.MATH``, which the
# math test compiles alone). ``arbor_store`` copies a block to the output, non-temporally when
# asked.
RUNTIME = r"""
#if ARBOR_UNROLL
#pragma GCC optimize("unroll-loops", "variable-expansion-in-unroller")
#endif
#include <cstdint>
#include <cstring>
#include <immintrin.h>

namespace {
inline void arbor_store(float* __restrict__ dst, const float* __restrict__ src, int64_t n, bool nt) {
  // an explicit vector copy, not memcpy: glibc's memcpy of a 16 KB block into fresh output pages
  // ran 2.5-3x slower than the plain loop on the development VM (AMD EPYC)
  int64_t i = 0;
#if defined(__AVX512F__) || defined(__AVX__) || defined(__SSE__)
#if defined(__AVX512F__)
  constexpr int64_t W = 16;
#elif defined(__AVX__)
  constexpr int64_t W = 8;
#else
  constexpr int64_t W = 4;
#endif
  if (nt) {
    for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) % (W * 4)) != 0; ++i) dst[i] = src[i];
    for (; i + W <= n; i += W) {
#if defined(__AVX512F__)
      _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
#elif defined(__AVX__)
      _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
#else
      _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
#endif
    }
  } else {
    for (; i + W <= n; i += W) {
#if defined(__AVX512F__)
      _mm512_storeu_ps(dst + i, _mm512_loadu_ps(src + i));
#elif defined(__AVX__)
      _mm256_storeu_ps(dst + i, _mm256_loadu_ps(src + i));
#else
      _mm_storeu_ps(dst + i, _mm_loadu_ps(src + i));
#endif
    }
  }
#endif
  for (; i < n; ++i) dst[i] = src[i];
}

// once, at the end of a task's stores (``arbor_part``): an sfence after every block waited for
// the write-combining buffers at each 2 KB row of a LayerNorm
inline void arbor_fence(bool nt) {
#if defined(__SSE__)
  if (nt) _mm_sfence();
#endif
}

inline void arbor_prefetch(const float* p, int64_t lo, int64_t hi, int64_t end) {
  hi = hi < end ? hi : end;
  for (int64_t i = lo; i < hi; i += 16) __builtin_prefetch(p + i, 0, 0);
}
}  // namespace
"""


def with_point(kernel: str, params: dict) -> str | None:
    """``kernel`` at schedule ``params``: None when it has no schedule, does not read a knob the
    point sets, is at that point already, or the point streams or prefetches without a block."""
    known = read(kernel)
    if known is None:
        return None
    knobs, now = known
    base = defaults_of(kernel)
    point = {**base, **params}
    if any(point[k] != base[k] for k in KNOBS if k not in knobs) or point == now \
            or (needs_block(point) and not point["block"]):
        return None
    out = kernel
    for k in KNOBS:
        out = re.sub(rf"^#define ARBOR_{k.upper()} \d+$", f"#define ARBOR_{k.upper()} {int(point[k])}", out,
                     count=1, flags=re.M)
    return out


def kernel_of(source: str) -> str | None:
    """The generated C++ kernel a candidate's module binds (``_ARBOR_CPP``), if any."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == SOURCE and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            return node.value.value
    return None


def reschedule(source: str, params: dict) -> str | None:
    """The candidate with its generated kernel at schedule ``params`` (its extension renamed for
    the new text, so no process loads the old build for it); None when that changes nothing."""
    kernel = kernel_of(source)
    new = with_point(kernel, params) if kernel is not None else None
    if new is None:
        return None
    for old_text in (f'{SOURCE} = r"""{kernel}"""\n', f"{SOURCE} = {kernel!r}\n"):
        if old_text in source:
            new_text = old_text.replace(kernel, new) if old_text.endswith('"""\n') else f"{SOURCE} = {new!r}\n"
            out = source.replace(old_text, new_text, 1)
            return out.replace(repr(extension_name(kernel)), repr(extension_name(new)), 1)
    return None


@register("cpp_schedule", validate=validate)
def cpp_schedule(source: str, params: dict) -> str | None:
    """A generated C++ candidate at another schedule point (None: no generated kernel here, a knob
    its kernel does not read, or the point it is at)."""
    validate(params)
    return reschedule(source, params)

"""The generated C++ kernel's schedule space (``cpp_schedule``): a point rewrites only the kernel's
schedule lines; sampled points of every loop shape, built together in ONE extension (the
session's, shared with test_cpp_reduce.py and test_cpp_codegen.py: tests/agents/cpp_combined.py), compute what the reference computes; and the compiler's own report proves every
active ``omp simd`` loop vectorised."""

from __future__ import annotations

import itertools
import os
import random
import re
import types

import pytest
import torch

from arbor.agents.specialists.applicability import cpp_toolchain
from arbor.agents.transforms import apply_move, to_modelnew
from arbor.agents.transforms.cpp import generate
from arbor.agents.transforms.cpp.schedule import DEFAULTS, KNOBS, MODE_DEFAULTS, VALUES, kernel_of, read, validate

needs_cxx = pytest.mark.skipif(not cpp_toolchain(os.environ),
                               reason="no C++ compiler, ninja or Python headers (what load_inline needs)")

_HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n"
RELU = _HEAD + '''    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(301, 1001)]  # not a multiple of any block or vector

def get_init_inputs():
    return []
'''
GELU_BIAS = _HEAD + '''    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(333))

    def forward(self, x):
        return F.gelu(x + self.bias)

def get_inputs():
    return [torch.randn(37, 333)]

def get_init_inputs():
    return []
'''
SOFTMAX = _HEAD + '''    def forward(self, x):
        return torch.softmax(x, dim=1)

def get_inputs():
    return [torch.randn(13, 5003)]  # rows not a multiple of any block, nor aligned

def get_init_inputs():
    return []
'''
LAYERNORM = _HEAD + '''    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm((7, 301))

    def forward(self, x):
        return self.ln(x)

def get_inputs():
    return [torch.randn(5, 7, 301)]

def get_init_inputs():
    return []
'''
RMS_CHANNELS = _HEAD + '''    def forward(self, x):
        return x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)

def get_inputs():
    return [torch.randn(3, 13, 21, 29)]  # 609 lanes: the last task's block is partial at any size

def get_init_inputs():
    return []
'''
COLUMN_SUM = _HEAD + '''    def forward(self, x):
        return torch.sum(x, dim=1)

def get_inputs():
    return [torch.randn(3, 13, 609)]

def get_init_inputs():
    return []
'''
PROBLEMS = {"flat": RELU, "flat-broadcast": GELU_BIAS, "row-softmax": SOFTMAX, "row-layernorm": LAYERNORM,
            "column-rmsnorm": RMS_CHANNELS, "column-sum": COLUMN_SUM}


def space() -> list[dict]:
    """Every point the knobs can form that ``validate`` admits."""
    out = []
    for values in itertools.product(*(VALUES[k] for k in KNOBS)):
        point = dict(zip(KNOBS, values))
        try:
            validate(point)
        except ValueError:
            continue
        out.append(point)
    return out


def test_a_point_rewrites_only_the_schedule_lines():
    base = generate(to_modelnew(SOFTMAX))
    knobs, point = read(kernel_of(base))
    # no erf in softmax, and no variance to fold into its first pass
    assert knobs == tuple(k for k in KNOBS if k not in ("erf", "onepass")) and point == DEFAULTS
    new = apply_move(base, "cpp_schedule", {"block": 4096, "stream": 1})
    assert read(kernel_of(new))[1] == {**DEFAULTS, "block": 4096, "stream": 1}
    changed = [(a, b) for a, b in zip(base.splitlines(), new.splitlines()) if a != b]
    assert len(changed) == 3  # the two schedule lines, and the extension's name (one build per text)
    assert "load_inline(name=" in changed[-1][1]
    assert apply_move(new, "cpp_schedule", {"block": 4096, "stream": 1}) is None  # already there
    assert apply_move(new, "cpp_schedule", {}) is not None  # back to the default point
    assert apply_move(to_modelnew(SOFTMAX), "cpp_schedule", {"unroll": 1}) is None  # no generated kernel


def test_bad_points_are_refused_at_load_time():
    for bad in ({"block": 100}, {"stream": 1, "block": 0}, {"prefetch": 256, "block": 0}, {"tile": 4}):
        with pytest.raises(ValueError):
            validate(bad)
    # unroll x (no block | block x stream x prefetch) x lanes x erf x onepass
    assert len(space()) == 2 * (1 + 5 * 2 * 4) * 4 * 2 * 2
    # a point that leaves the block unset takes the kernel's: none in a row kernel, so not offered
    assert apply_move(generate(to_modelnew(SOFTMAX)), "cpp_schedule", {"stream": 1}) is None


def test_a_column_normalisation_has_its_own_defaults_and_a_point_starts_from_them():
    """column.py: a task's lanes are the block, streamed and prefetched a block ahead by default
    (MODE_DEFAULTS); a column reduction (no full output) keeps the global point."""
    base = generate(to_modelnew(RMS_CHANNELS))
    kernel = kernel_of(base)
    knobs, point = read(kernel)
    assert knobs == ("unroll", "block", "stream", "prefetch") and point == {**DEFAULTS, **MODE_DEFAULTS["column"]}
    assert "LANES = ARBOR_BLOCK > 0 ? ARBOR_BLOCK : 1024" in kernel and "arbor_store(o + start + i * INNER" in kernel
    assert "arbor_prefetch(p0 + here, ARBOR_PREFETCH" in kernel
    moved = read(kernel_of(apply_move(base, "cpp_schedule", {"block": 1024})))[1]
    assert moved == {**DEFAULTS, **MODE_DEFAULTS["column"], "block": 1024}  # stream and prefetch kept
    assert apply_move(base, "cpp_schedule", {"block": 0}) is None  # streams and prefetches: needs a block
    assert apply_move(base, "cpp_schedule", {"lanes": 16}) is None  # a knob of row reductions only
    total = kernel_of(generate(to_modelnew(COLUMN_SUM)))
    assert read(total) == (("unroll", "block", "prefetch"), DEFAULTS) and "ARBOR_DEFAULTS" not in total
    assert "arbor_prefetch(p0 + here" in total and "arbor_store" not in total.split("namespace {\nvoid arbor_part")[1]


def test_a_kernel_without_a_store_loop_offers_only_the_unroller():
    total = _HEAD + '''    def forward(self, x):
        return torch.sum(x, dim=1)

def get_inputs():
    return [torch.randn(8, 512)]

def get_init_inputs():
    return []
'''
    base = generate(to_modelnew(total))
    assert read(kernel_of(base))[0] == ("unroll", "lanes")
    assert apply_move(base, "cpp_schedule", {"block": 4096}) is None
    assert apply_move(base, "cpp_schedule", {"unroll": 1}) is not None


def test_a_division_by_a_row_value_is_a_multiply_by_its_reciprocal():
    kernel = kernel_of(generate(to_modelnew(SOFTMAX)))
    # softmax's store pass: one division a row (hoisted by the compiler), a multiply an element
    assert "* (1.0f / r3))" in kernel and "/ r3)" not in kernel.replace("(1.0f / r3)", "")


# --------------------------------------------------------------------------- one build, many points

_MOVE = re.compile(r"^(0\.0f|\w+|\w+\[l\]);$")  # what a fill or a copy assigns


def _active_simd_loops(text: str, first_line: int) -> list[range]:
    """The lines (in the built file) of each loop under ``#pragma omp simd`` that the preprocessor
    keeps at the kernel's schedule (the generated ``#if ARBOR_*`` / ``#else`` / ``#endif``): GCC
    reports a vectorised loop at a line inside it (after inlining, often its first load)."""
    point = read(text)[1]
    lines, stack, out = text.splitlines(), [], []
    for n, line in enumerate(lines):
        s = line.strip()
        if s.startswith("#if ARBOR_"):
            stack.append(bool(point[s.split("ARBOR_")[1].strip().lower()]))
        elif s == "#else" and stack:
            stack[-1] = not stack[-1]
        elif s == "#endif" and stack:
            stack.pop()
        elif s.startswith("#pragma omp simd") and all(stack):
            indent = len(lines[n + 1]) - len(lines[n + 1].lstrip())
            end = next(k for k in range(n + 2, len(lines)) if lines[k].startswith(" " * indent + "}"))
            body = [line.strip() for line in lines[n + 2:end]]
            if all(_MOVE.match(line.rsplit(" = ", 1)[-1]) for line in body):
                continue  # a zero fill or a copy: GCC calls memset / memcpy (vector code of their own)
            out.append(range(first_line + n + 1, first_line + end + 2))
    return out


def cases() -> list[tuple[str, str]]:
    """(problem name, candidate source): the default and one sampled point of every loop shape (a
    build is ~6 s of CPU a kernel here); the flat shape's sample streams, so the intrinsics path runs."""
    rng = random.Random(41)
    out = []
    for name, problem in PROBLEMS.items():
        base = generate(to_modelnew(problem))
        knobs, own = read(kernel_of(base))  # its defaults: a column normalisation has its own
        pool = [p for p in space() if p != own and (p["stream"] or name != "flat")
                and all(p[k] == own[k] for k in KNOBS if k not in knobs)]
        points = [own] + rng.sample(pool, 1)
        out += [(name, base if p == own else apply_move(base, "cpp_schedule", p)) for p in points]
    return out


@needs_cxx
@pytest.mark.slow  # the session's one load_inline build (tests/agents/conftest.py; on workers, first)
def test_sampled_points_of_every_loop_shape_match_the_reference_and_vectorise(cpp_build):
    check_built_cases(cpp_build["schedule"], PROBLEMS)


def check_built_cases(build, problems: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    """Every case of ``build`` (a cpp_combined.Built): each loop its point keeps under ``#pragma omp
    simd`` vectorised, and its output equal to ``problems[name]``'s reference's."""
    for i, (name, src) in enumerate(build.cases):
        kernel = build.kernel(i)
        loops = _active_simd_loops(kernel, build.first_line(i))
        assert loops and all(build.vectorised.intersection(loop) for loop in loops), (name, read(kernel)[1], loops)
        mod = build.bind(i)
        ref = types.ModuleType("ref")
        exec(compile(problems[name], "ref", "exec"), ref.__dict__)  # noqa: S102
        torch.manual_seed(i)
        a = ref.Model(*ref.get_init_inputs())
        b = mod.ModelNew(*ref.get_init_inputs())
        b.load_state_dict(a.state_dict())
        with torch.no_grad():
            x = ref.get_inputs()
            # the campaign's float32 tolerance is 1e-4 (atol = rtol); checked tighter in atol
            torch.testing.assert_close(b(*x), a(*x), rtol=1e-4, atol=1e-5, msg=lambda m: f"{name} {read(kernel)[1]}: {m}")

"""Transforms: each rewrite compiles, changes the AST, keeps numerics and never mutates inputs."""

from __future__ import annotations

import ast
import itertools
import sys
import types

import pytest
import torch

from arbor.agents.transforms import apply_move, get_transform, to_modelnew, transform_names

# Written here in the upstream KernelBench layout (module-level sizes, Model, get_inputs,
# get_init_inputs): the tanh-approximate GELU spelled out op by op, as reference code often has it.
NEW_GELU = '''import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """tanh-approximate GELU, one operator per kernel."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


batch_size = 2000
dim = 1000


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''
_COUNTER = itertools.count()
GELU_PATTERN = {
    "pattern": "0.5 * $x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * ($x + 0.044715 * torch.pow($x, 3.0))))",
    "replacement": "torch.nn.functional.gelu($x, approximate='tanh')",
}

CONV = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scale):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)
        self.scale = scale

    def forward(self, x):
        y = self.conv(x)
        y = y * self.scale
        y = torch.relu(y)
        y = y + self.bias
        z = torch.pow(y, 2)
        y = torch.sigmoid(y)
        w = y ** 3 + torch.pow(torch.abs(x), 0.5).mean()
        return y + z + w

def get_inputs():
    return [torch.randn(2, 3, 8, 8)]

def get_init_inputs():
    return [3, 4, 3, 0.5]
'''


def load(source: str) -> types.ModuleType:
    """Import a candidate as a real module (torch.compile looks its globals up by module name)."""
    name = f"arbor_test_candidate_{next(_COUNTER)}"
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def run_both(before: str, after: str, inputs: list | None = None, **tol) -> tuple[list, torch.Tensor, torch.Tensor]:
    """Build both ModelNew versions with identical weights and run them on identical inputs."""
    a, b = load(before), load(after)
    torch.manual_seed(0)
    model_a = a.ModelNew(*a.get_init_inputs())
    torch.manual_seed(0)
    model_b = b.ModelNew(*b.get_init_inputs())
    model_b.load_state_dict(model_a.state_dict())
    torch.manual_seed(1)
    inputs = inputs if inputs is not None else a.get_inputs()
    out_a = model_a(*[t.clone() for t in inputs])
    out_b = model_b(*inputs)
    assert torch.allclose(out_a, out_b, **(tol or {"rtol": 1e-5, "atol": 1e-6})), (out_a - out_b).abs().max()
    return inputs, out_a, out_b


def changed(before: str, after: str | None) -> str:
    assert after is not None
    compile(after, "<after>", "exec")
    assert ast.dump(ast.parse(before)) != ast.dump(ast.parse(after))
    assert "class ModelNew" in after
    return after


def test_registry_lists_all_transforms_and_unknown_name_is_helpful() -> None:
    expected = {"rewrite_pattern", "strength_reduce_pow", "inplace_elementwise", "wrap_compile",
                "inference_mode", "set_threads", "channels_last"}
    assert expected <= set(transform_names())
    with pytest.raises(KeyError, match="wrap_compile"):
        get_transform("wrap_compiel")


LATE_MODULE = """from arbor.agents.transforms.base import register


@register("late_move")
def late_move(source, params):
    return source + "# late\\n"
"""


def test_a_declared_transform_is_known_and_validated_before_its_module_is_imported(tmp_path, monkeypatch) -> None:
    """The graph family is declared this way so that loading skills never imports torch."""
    from arbor.agents.transforms import base, validate_params

    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    monkeypatch.setattr(base, "_VALIDATORS", dict(base._VALIDATORS))
    (tmp_path / "late_transform_impl.py").write_text(LATE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))

    def check(params: dict) -> None:
        if params:
            raise ValueError("late_move takes no params")

    base.declare("late_move", "late_transform_impl", validate=check)
    assert "late_move" in transform_names()
    validate_params("late_move", {})
    with pytest.raises(ValueError, match="takes no params"):
        validate_params("late_move", {"x": 1})
    assert "late_transform_impl" not in sys.modules  # validated by name: nothing imported yet
    with pytest.raises(KeyError, match="late_move"):  # the unknown-name error lists declared names too
        get_transform("late_mvoe")
    assert get_transform("late_move")("a = 1\n", {}) == "a = 1\n# late\n"
    assert "late_transform_impl" in sys.modules
    with pytest.raises(ValueError, match="already registered"):
        base.declare("late_move", "late_transform_impl")
    base.declare("never_registered", "json")
    with pytest.raises(RuntimeError, match="json does not register transform 'never_registered'"):
        get_transform("never_registered")
    monkeypatch.delitem(sys.modules, "late_transform_impl")


def test_the_graph_family_is_declared_with_the_passes_it_implements() -> None:
    from arbor.agents.transforms.graph import PASS_NAMES
    from arbor.agents.transforms.graph.rewrite import PASSES

    assert tuple(PASSES) == PASS_NAMES
    assert {"graph_rewrite", "compile_epilogue", "triton_codegen"} <= set(transform_names())


def test_to_modelnew_renames_super_call_and_keeps_globals() -> None:
    src = to_modelnew(NEW_GELU)
    tree = ast.parse(src)
    assert not any(isinstance(n, ast.Name) and n.id == "Model" for n in ast.walk(tree))
    assert "super(ModelNew, self).__init__()" in src
    mod = load(src)
    assert mod.batch_size == 2000 and mod.get_init_inputs() == []
    assert isinstance(mod.ModelNew(), torch.nn.Module)
    with pytest.raises(ValueError):
        to_modelnew("x = 1\n")


def test_rewrite_pattern_on_kernelbench_new_gelu() -> None:
    base = to_modelnew(NEW_GELU)
    after = changed(base, apply_move(base, "rewrite_pattern", GELU_PATTERN))
    assert "gelu(x, approximate='tanh')" in after and "tanh(math" not in after
    run_both(base, after, [torch.randn(64, 64)])
    assert apply_move(after, "rewrite_pattern", GELU_PATTERN) is None  # nothing left to match
    assert apply_move(base, "rewrite_pattern", GELU_PATTERN) == after  # deterministic


def test_rewrite_pattern_wildcards_must_match_the_same_subtree() -> None:
    silu = {"pattern": "$x * torch.sigmoid($x)", "replacement": "torch.nn.functional.silu($x)"}
    src = ("import torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n"
           "    def forward(self, a, b):\n        return a * torch.sigmoid(b)\n")
    assert apply_move(src, "rewrite_pattern", silu) is None
    same = src.replace("torch.sigmoid(b)", "torch.sigmoid(a)")
    assert "silu(a)" in changed(same, apply_move(same, "rewrite_pattern", silu))
    swapped = src.replace("a * torch.sigmoid(b)", "torch.sigmoid(a + 1) * (a + 1.0)")  # commutative, 1 == 1.0
    assert "silu(a + 1" in changed(swapped, apply_move(swapped, "rewrite_pattern", silu))


def test_rewrite_pattern_scope_adds_imports_and_rejects_bad_templates() -> None:
    src = ("import torch.nn as nn\nimport torch\n"
           "class Swish(nn.Module):\n    def forward(self, x):\n        return x * torch.sigmoid(x)\n"
           "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.act = Swish()\n    def forward(self, x):\n        return self.act(x)\n"
           "def get_inputs():\n    return [torch.randn(4) * torch.sigmoid(torch.randn(4))]\n")
    params = {"pattern": "$x * torch.sigmoid($x)", "replacement": "F.silu($x)"}
    assert apply_move(src, "rewrite_pattern", params) is None  # default scope: ModelNew only
    after = changed(src, apply_move(src, "rewrite_pattern", {**params, "scope": "module"}))
    assert "import torch.nn.functional as F" in after
    assert load(after).Swish()(torch.ones(2)).allclose(torch.nn.functional.silu(torch.ones(2)))
    with pytest.raises(ValueError, match=r"\$y"):
        apply_move(src, "rewrite_pattern", {"pattern": "$x + 1", "replacement": "$y"})
    with pytest.raises(ValueError):
        apply_move(src, "rewrite_pattern", {"pattern": "$x +", "replacement": "$x"})


def test_strength_reduce_pow() -> None:
    base = to_modelnew(CONV)
    after = changed(base, apply_move(base, "strength_reduce_pow", {"max_exponent": 3}))
    assert "z = y * y" in after and "y * y * y" in after and "torch.sqrt(torch.abs(x))" in after
    run_both(base, after)
    only_two = apply_move(base, "strength_reduce_pow", {"max_exponent": 2})
    assert only_two is not None and "y ** 3" in only_two
    untouched = "class ModelNew:\n    def forward(self, x):\n        return self.a ** 2 + x ** 0.5\n"
    assert apply_move(untouched, "strength_reduce_pow", {}) is None


def test_inplace_elementwise_rewrites_fresh_locals_only() -> None:
    base = to_modelnew(CONV)
    after = changed(base, apply_move(base, "inplace_elementwise", {}))
    for expected in ("y = y.mul_(self.scale)", "y = y.relu_()", "y = y.add_(self.bias)", "y = y.sigmoid_()"):
        assert expected in after
    # z = torch.pow(y, 2) was read before sigmoid_: allowed (pow allocates, no alias).
    inputs, _, _ = run_both(base, after)
    assert inputs[0] is not None


def test_inplace_never_mutates_forward_arguments_or_aliases() -> None:
    src = ("import torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n"
           "    def __init__(self):\n        super().__init__()\n        self.drop = nn.Dropout(0.0)\n"
           "    def forward(self, x, s):\n"
           "        x = torch.relu(x)\n"          # rebinding the argument name is fine (fresh)...
           "        s = torch.sigmoid(s)\n"
           "        x = x * 2.0\n"                 # ...so this may become in-place
           "        v = s.view(-1)\n"              # s now has an alias: must stay out-of-place
           "        s = s + 1.0\n"
           "        d = self.drop(x)\n"            # dropout may return its input: never fresh
           "        d = torch.tanh(d)\n"
           "        return x.sum() + s.sum() + v.sum() + d.sum()\n"
           "def get_inputs():\n    return [torch.randn(8, 8), torch.randn(8, 8)]\n"
           "def get_init_inputs():\n    return []\n")
    after = changed(src, apply_move(src, "inplace_elementwise", {}))
    assert "x = x.mul_(2.0)" in after
    assert "s = s + 1.0" in after and "d = torch.tanh(d)" in after
    x, s = torch.randn(8, 8), torch.randn(8, 8)
    x0, s0 = x.clone(), s.clone()
    run_both(src, after, [x, s])
    assert torch.equal(x, x0) and torch.equal(s, s0)

    direct = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
              "        x = torch.relu(x)\n        return x\n")
    assert apply_move(direct, "inplace_elementwise", {}) is None  # x is the caller's tensor


def test_wrap_compile_structure_and_numerics() -> None:
    base = to_modelnew(CONV)
    after = changed(base, apply_move(base, "wrap_compile", {"mode": "default", "backend": "eager"}))
    cls = next(n for n in ast.parse(after).body if isinstance(n, ast.ClassDef))
    names = [n.name for n in cls.body if isinstance(n, ast.FunctionDef)]
    assert names == ["__init__", "_forward_eager", "forward"]
    assert "self._compiled_forward = torch.compile(self._forward_eager, mode='default', dynamic=False" in after
    run_both(base, after, rtol=1e-4, atol=1e-5)
    assert apply_move(after, "wrap_compile", {"mode": "default"}) is None
    opt = apply_move(base, "wrap_compile", {"options": {"epilogue_fusion": True}})
    assert opt is not None and "options={'epilogue_fusion': True}" in opt and "mode=" not in opt
    with pytest.raises(ValueError):
        apply_move(base, "wrap_compile", {"mode": "max-autotune", "options": {"epilogue_fusion": True}})
    with pytest.raises(ValueError):
        apply_move(base, "wrap_compile", {"mode": "turbo"})


def test_inference_mode_and_set_threads() -> None:
    base = to_modelnew(CONV)
    after = changed(base, apply_move(base, "inference_mode", {}))
    assert "@torch.inference_mode()" in after
    run_both(base, after)
    assert apply_move(after, "inference_mode", {}) is None

    threads = torch.get_num_threads()
    try:
        after = changed(base, apply_move(base, "set_threads", {"threads": 1}))
        init = next(n for n in ast.walk(ast.parse(after)) if isinstance(n, ast.FunctionDef) and n.name == "__init__")
        assert ast.unparse(init.body[0]) == "torch.set_num_threads(1)"
        run_both(base, after)
        assert torch.get_num_threads() == 1
        assert apply_move(after, "set_threads", {"threads": 1}) is None
        again = apply_move(after, "set_threads", {"threads": 2})
        assert again is not None and again.count("set_num_threads") == 1
    finally:
        torch.set_num_threads(threads)


def test_channels_last_keeps_values_and_inputs() -> None:
    base = to_modelnew(CONV)
    after = changed(base, apply_move(base, "channels_last", {}))
    assert "self.to(memory_format=torch.channels_last)" in after
    x = torch.randn(2, 3, 8, 8)
    x0, stride0 = x.clone(), x.stride()
    _, _, out = run_both(base, after, [x], rtol=1e-4, atol=1e-5)
    assert torch.equal(x, x0) and x.stride() == stride0
    assert apply_move(after, "channels_last", {}) is None
    assert apply_move(to_modelnew(NEW_GELU), "channels_last", {}) is None  # no Conv2d


def test_compute_moves_compose_after_compile() -> None:
    base = to_modelnew(CONV)
    compiled = apply_move(base, "wrap_compile", {"backend": "eager"})
    assert compiled is not None
    after = changed(compiled, apply_move(compiled, "inplace_elementwise", {}))
    assert "y.relu_()" in after
    both = changed(after, apply_move(after, "channels_last", {}))
    run_both(base, both, rtol=1e-4, atol=1e-5)


def test_rewrite_pattern_matches_numeric_literals_by_value() -> None:
    gelu = {"pattern": "0.5 * $x * (1.0 + torch.tanh(0.7978845608 * ($x + 0.044715 * $x * $x * $x)))",
            "replacement": "torch.nn.functional.gelu($x, approximate='tanh')"}
    src = ("import torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
           "        return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))\n")
    assert "gelu(x, approximate='tanh')" in changed(src, apply_move(src, "rewrite_pattern", gelu))
    other = src.replace("0.7978845608028654", "0.79")  # a different constant is not the same function
    assert apply_move(other, "rewrite_pattern", gelu) is None

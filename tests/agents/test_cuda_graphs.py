"""The ``cuda_graph`` move: its runtime captures once per input signature and replays honestly.

The generated ``GraphedForward`` runs here against a fake ``torch.cuda`` surface (``fake_cuda``) on
CPU tensors: capture records the forward's ops, replay re-runs them into the same static storage.
What must hold is what the harness checks on a GPU: fresh inputs flow through every call (they are
copied into the captured buffers), and no output aliases the graph's static storage, which the next
replay overwrites.
"""

from __future__ import annotations

import types

import pytest
import torch

from arbor.agents.critic.guard import check_source
from arbor.agents.transforms import apply_move, to_modelnew

from .fake_cuda import FakeCuda

PROBLEM = '''
import torch
import torch.nn as nn

batch_size = 8
dim = 16


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x, scale):
        y = torch.relu(self.fc(x)) * scale
        return y, y.sum(dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim), 2.0]


def get_init_inputs():
    return [dim]
'''


def graphed_model():
    """ModelNew after the move, its runtime pointed at a fake CUDA, and the eager reference."""
    source = apply_move(to_modelnew(PROBLEM), "cuda_graph", {"warmup": 3})
    assert source is not None
    mod = types.ModuleType("candidate")
    exec(compile(source, "<candidate>", "exec"), mod.__dict__)  # noqa: S102 - our own transform's output
    torch.manual_seed(0)
    model = mod.ModelNew(16)
    torch.manual_seed(0)
    ns: dict = {}
    exec(PROBLEM, ns)  # noqa: S102
    ref = ns["Model"](16)
    cuda = FakeCuda()
    runner = model._graphed_forward
    runner.cuda, runner.device_type = cuda, "cpu"  # capture CPU tensors on the fake device
    calls: list[str] = []
    eager = runner.fn
    runner.fn = lambda *a, **k: (calls.append(cuda.current), eager(*a, **k))[1]
    return model, ref, runner, cuda, calls


def test_first_call_warms_up_on_a_side_stream_captures_then_replays():
    model, ref, runner, cuda, calls = graphed_model()
    x = torch.randn(8, 16)
    with torch.no_grad():
        out = model(x, 2.0)
        want = ref(x, 2.0)
    assert calls == ["side1"] * 3 + ["capture"]  # three warm-up calls on the side stream, one captured
    assert ("wait", "side1", "default") in cuda.events and ("wait", "default", "side1") in cuda.events
    assert cuda.events.index(("wait", "default", "side1")) < cuda.events.index(("capture", 1))
    assert len(cuda.graphs) == 1 and cuda.graphs[0].replays == 1  # the captured work ran by replay only
    assert all(torch.allclose(a, b) for a, b in zip(out, want))


def test_fresh_inputs_flow_through_the_static_buffers_every_call():
    model, ref, runner, cuda, calls = graphed_model()
    with torch.no_grad():
        for seed in range(4):
            x = torch.randn(8, 16, generator=torch.Generator().manual_seed(seed))
            out, want = model(x, 2.0), ref(x, 2.0)
            assert all(torch.allclose(a, b) for a, b in zip(out, want)), seed
            (_graph, static_in, _out), = runner.graphs.values()
            assert torch.equal(static_in[0], x) and static_in[0].data_ptr() != x.data_ptr()
    assert len(cuda.graphs) == 1 and cuda.graphs[0].replays == 4 and len(calls) == 4  # captured once


def test_outputs_never_alias_the_graphs_static_storage():
    model, _ref, runner, _cuda, _calls = graphed_model()
    with torch.no_grad():
        first = model(torch.randn(8, 16), 2.0)
        kept = [t.clone() for t in first]
        second = model(torch.randn(8, 16), 2.0)
    (_graph, _in, static_out), = runner.graphs.values()
    for out in (first, second):
        for t, s in zip(out, static_out):
            assert t.untyped_storage().data_ptr() != s.untyped_storage().data_ptr()
    assert all(torch.equal(a, b) for a, b in zip(first, kept))  # the second replay overwrote nothing of ours
    assert not torch.equal(first[0], second[0])


def test_a_new_shape_or_scalar_is_captured_again_and_a_seen_one_is_replayed():
    model, ref, runner, cuda, _calls = graphed_model()
    with torch.no_grad():
        model(torch.randn(8, 16), 2.0)
        x4 = torch.randn(4, 16)
        out = model(x4, 2.0)
        assert out[0].shape == (4, 16) and torch.allclose(out[0], ref(x4, 2.0)[0])
        out = model(x4, 3.0)  # a Python scalar is baked into the graph: its value is part of the key
        assert torch.allclose(out[0], ref(x4, 3.0)[0])
        model(torch.randn(8, 16), 2.0)
    assert len(cuda.graphs) == 3 and len(runner.graphs) == 3
    assert [g.replays for g in cuda.graphs] == [2, 1, 1]


def test_autograd_and_keyword_calls_run_eagerly():
    model, ref, runner, cuda, calls = graphed_model()
    x = torch.randn(8, 16)
    out = model(x, 2.0)  # grad mode on: no capture
    assert not cuda.graphs and calls == [cuda.current] and out[0].requires_grad
    with torch.no_grad():
        model(x, scale=2.0)
    assert not cuda.graphs


def test_the_move_passes_the_guard_and_declines_what_it_cannot_capture():
    base = to_modelnew(PROBLEM)
    graphed = apply_move(base, "cuda_graph", {})
    assert check_source(graphed) == [] and "class GraphedForward" in graphed
    assert apply_move(graphed, "cuda_graph", {}) is None  # already graphed
    assert apply_move(graphed, "wrap_compile", {"mode": "default"}) is None  # would trace the replay
    assert apply_move(apply_move(base, "wrap_compile", {}), "cuda_graph", {}) is None
    triton = base.replace("import torch\n", "import torch\nimport triton\n", 1)
    assert apply_move(triton, "cuda_graph", {}) is None  # its kernels would launch out of the harness's sight
    with pytest.raises(ValueError, match="warmup"):
        apply_move(base, "cuda_graph", {"warmup": 0})

"""A fake of the ``torch.cuda`` surface a CUDA-graph capture uses, modelling its documented behaviour
on CPU tensors, so the ``cuda_graph`` move's runtime can be tested without a GPU.

Modelled (PyTorch's CUDA graphs documentation, "whole network capture"):

- ``Stream()``, ``current_stream()``, ``stream(s)`` and ``wait_stream``: recorded as events, with the
  stream that is current whenever the captured function runs;
- ``graph(g)``: while it is entered, every ATen op is *recorded* into ``g`` (a dispatch mode) and,
  like a real capture, nothing it produced is valid afterwards: the recorded outputs are filled with
  NaN when the capture ends, so only a replay can give them values;
- ``CUDAGraph.replay()``: re-runs the recorded ops in order, writing each result into the storage
  the capture produced — the static output is overwritten in place on every replay, exactly the
  behaviour that makes returning it (instead of a clone) a cached-output bug.
"""

from __future__ import annotations

import contextlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class FakeStream:
    def __init__(self, cuda: "FakeCuda", name: str) -> None:
        self.cuda, self.name = cuda, name

    def wait_stream(self, other: "FakeStream") -> None:
        self.cuda.events.append(("wait", self.name, other.name))


class FakeGraph:
    def __init__(self) -> None:
        self.ops: list = []
        self.replays = 0

    def replay(self) -> None:
        self.replays += 1
        with torch.no_grad():
            for func, args, kwargs, out in self.ops:
                new = func(*args, **kwargs)
                for old, fresh in zip(tree_leaves(out), tree_leaves(new)):
                    if isinstance(old, torch.Tensor) and old is not fresh:
                        old.copy_(fresh)


class _Record(TorchDispatchMode):
    def __init__(self, graph: FakeGraph) -> None:
        super().__init__()
        self.graph = graph

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        self.graph.ops.append((func, args, kwargs or {}, out))
        return out


class FakeCuda:
    def __init__(self) -> None:
        self.events: list = []
        self.current = "default"
        self.graphs: list[FakeGraph] = []
        self._streams = 0

    def Stream(self) -> FakeStream:  # noqa: N802 - torch.cuda's name
        self._streams += 1
        return FakeStream(self, f"side{self._streams}")

    def current_stream(self) -> FakeStream:
        return FakeStream(self, self.current)

    @contextlib.contextmanager
    def stream(self, s: FakeStream):  # type: ignore[no-untyped-def]
        previous, self.current = self.current, s.name
        self.events.append(("enter", s.name))
        try:
            yield
        finally:
            self.current = previous
            self.events.append(("exit", s.name))

    def CUDAGraph(self) -> FakeGraph:  # noqa: N802 - torch.cuda's name
        graph = FakeGraph()
        self.graphs.append(graph)
        return graph

    @contextlib.contextmanager
    def graph(self, g: FakeGraph):  # type: ignore[no-untyped-def]
        self.events.append(("capture", len(self.graphs)))
        previous, self.current = self.current, "capture"
        try:
            with _Record(g):
                yield
        finally:
            self.current = previous
        made = set()  # storage the captured work allocated (not the inputs', nor the parameters')
        for _func, args, kwargs, out in g.ops:
            seen = {id(t.untyped_storage()) for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
            made |= {t.untyped_storage().data_ptr() for t in tree_leaves(out)
                     if isinstance(t, torch.Tensor) and id(t.untyped_storage()) not in seen}
        external = {t.untyped_storage().data_ptr() for _f, args, kwargs, _o in g.ops
                    for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)} - made
        with torch.no_grad():  # captured work has not run yet: only a replay fills its outputs
            for *_, out in g.ops:
                for t in tree_leaves(out):
                    if isinstance(t, torch.Tensor) and t.is_floating_point() \
                            and t.untyped_storage().data_ptr() not in external:
                        t.fill_(float("nan"))

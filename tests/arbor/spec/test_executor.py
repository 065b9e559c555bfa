"""The ``executor:`` section: defaults keep the serial loop, mistakes are one line each."""

from __future__ import annotations

from pathlib import Path

import pytest

from arbor.spec import SpecError, parse_spec

BASE = {"name": "x", "target": {"problem": "p.py"}}


def test_default_is_one_local_worker_the_serial_loop():
    spec = parse_spec(dict(BASE), "c.yaml", Path("."))
    assert spec.executor.kind == "local" and spec.executor.workers == 1 and not spec.executor.parallel
    ray = parse_spec({**BASE, "executor": {"kind": "ray", "workers": 64, "address": "ray://head:10001",
                                           "resources_per_worker": {"GPU": 1}}}, "c.yaml", Path("."))
    assert ray.executor.parallel and ray.executor.resources_per_worker == {"GPU": 1}


@pytest.mark.parametrize("executor, expected", [
    ({"workers": 0}, "executor.workers: Input should be greater than or equal to 1"),
    ({"kind": "slurm"}, "executor.kind: Input should be 'local' or 'ray'"),
    ({"address": "http://x"}, "executor.address: executor.address 'http://x' is not auto, local, ray://host:port"),
    ({"resources_per_worker": {"GPU": -1}}, "executor.resources_per_worker: executor.resources_per_worker: GPU"),
    ({"wokers": 2}, "executor.wokers: Extra inputs are not permitted — remove it or check its spelling"),
])
def test_mistakes_are_one_line_naming_the_field(executor, expected):
    with pytest.raises(SpecError) as e:
        parse_spec({**BASE, "executor": executor}, "c.yaml", Path("."))
    assert len(e.value.problems) == 1 and expected in e.value.problems[0], e.value.problems

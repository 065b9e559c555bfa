"""Runners and executors built from a campaign spec (arbor/spec_runners.py), as every caller gets them."""

from __future__ import annotations

from arbor.spec_runners import executor_for, runner_for
from arbor.sandbox.executors import LocalExecutor
from arbor.sandbox.gpu import ClockGuard
from arbor.spec import parse_spec


def _spec(tmp_path, **extra):
    (tmp_path / "p.py").write_text("x = 1\n")
    return parse_spec({"name": "r", "target": {"problem": "p.py"}, **extra}, "r.yaml", tmp_path)


def test_a_guarded_runner_holds_its_own_clock_guard_and_a_bare_one_none(tmp_path):
    spec = _spec(tmp_path, sandbox={"max_processes": 77})
    bare, guarded = runner_for(spec, guarded=False), runner_for(spec)
    try:
        assert bare.name == guarded.name == "local"
        assert not any(isinstance(h, ClockGuard) for h in bare.hooks)
        assert [type(h) for h in guarded.hooks if isinstance(h, ClockGuard)] == [ClockGuard]
    finally:
        bare.close()
        guarded.close()


def test_overrides_replace_the_specs_options(tmp_path):
    spec = _spec(tmp_path)
    runner = runner_for(spec, guarded=False, kind="local", network="host")
    try:
        assert runner.network == "host"
    finally:
        runner.close()


def test_the_serial_loop_has_no_executor_and_workers_get_slots(tmp_path):
    assert executor_for(_spec(tmp_path)) is None
    ex = executor_for(_spec(tmp_path, executor={"workers": 2}), uses_device=False)
    try:
        assert isinstance(ex, LocalExecutor) and ex.workers == 2
    finally:
        ex.close()

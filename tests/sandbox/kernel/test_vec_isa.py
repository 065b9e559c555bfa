"""The host's vector-ISA verdict (sandbox/kernel/vec_isa.py): probed once per machine and torch, kept on
disk under the environment it holds for, passed to CPU compile jobs of that environment only, and
never taken from a job."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from arbor.sandbox.kernel import vec_isa
from arbor.sandbox.harness import compile_cache as job_cache

LOCAL = SimpleNamespace(name="local")  # a runner whose jobs run the host's torch and compiler


@pytest.fixture
def facts(tmp_path, monkeypatch):
    """A private facts folder, an empty memory, and a counted stand-in for the probe."""
    monkeypatch.setenv("ARBOR_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ARBOR_ISA_HINT", raising=False)
    monkeypatch.setattr(vec_isa, "_MEMO", {})
    calls: list[dict] = []

    def probe(env):  # type: ignore[no-untyped-def]
        calls.append(env)
        return True

    monkeypatch.setattr(vec_isa, "_probe", probe)
    return SimpleNamespace(dir=tmp_path / "machine", calls=calls)


def test_probed_once_then_read_from_memory_and_from_the_file_a_process_left(facts, monkeypatch):
    env = job_cache.environment()
    assert vec_isa.hint(LOCAL, "cpu") == {"vec_isa_ok": True, "environment": env}
    assert vec_isa.hint(LOCAL, "cpu") and len(facts.calls) == 1
    [kept] = list(facts.dir.glob("vec-isa-*.json"))
    assert json.loads(kept.read_text()) == {"environment": env, "vec_isa_ok": True}
    monkeypatch.setattr(vec_isa, "_MEMO", {})  # a new process: the file answers
    assert vec_isa.hint(LOCAL, "cpu") and len(facts.calls) == 1
    assert vec_isa.hint(LOCAL, "cuda") == {}  # GPU jobs never ran the CPU probe
    monkeypatch.setenv("ARBOR_ISA_HINT", "0")
    assert vec_isa.hint(LOCAL, "cpu") == {}


def test_a_failed_probe_passes_nothing_and_a_file_of_another_environment_is_not_read(facts, monkeypatch):
    env = job_cache.environment()
    monkeypatch.setattr(vec_isa, "_probe", lambda env: False)
    assert vec_isa.hint(LOCAL, "cpu") == {}  # the jobs probe themselves, as before
    [kept] = list(facts.dir.glob("vec-isa-*.json"))
    kept.write_text(json.dumps({"environment": {**env, "torch": "0.0"}, "vec_isa_ok": True}))
    monkeypatch.setattr(vec_isa, "_MEMO", {})
    monkeypatch.setattr(vec_isa, "_probe", lambda env: None)  # could not say: nothing written
    assert vec_isa.hint(LOCAL, "cpu") == {}
    assert json.loads(kept.read_text())["environment"]["torch"] == "0.0"


def test_the_probe_child_says_nothing_usable_when_it_prints_another_environment_or_junk(tmp_path, monkeypatch):
    env = job_cache.environment()
    script = tmp_path / "isa_probe.py"  # beside a stand-in compile_cache.py, as the real one is
    monkeypatch.setattr(vec_isa, "job_cache", SimpleNamespace(__file__=str(tmp_path / "compile_cache.py")))
    for out in (json.dumps({"environment": {**env, "cpu": "other"}, "vec_isa_ok": True}), "not json", ""):
        script.write_text(f"print({out!r})\n")
        assert vec_isa._probe(env) is None, out
    script.write_text(f"print({json.dumps({'environment': env, 'vec_isa_ok': True})!r})\n")
    assert vec_isa._probe(env) is True


def test_a_job_trusts_the_hint_only_for_its_own_environment(tmp_path, monkeypatch):
    for n in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS",
              "TORCHINDUCTOR_VEC_ISA_OK", "TORCHINDUCTOR_FX_GRAPH_CACHE", "TORCHINDUCTOR_AUTOGRAD_CACHE"):
        monkeypatch.setenv(n, "x")  # monkeypatch restores whatever activate() sets
        monkeypatch.delenv(n)
    env = job_cache.environment()
    other = job_cache.JobCache({"key": "k" * 64, "out": "o.zip", "vec_isa_ok": True,
                                "environment": {**env, "torch": "9.9"}}, str(tmp_path / "a"))
    other.activate()  # a container's torch: the host's verdict does not hold there
    assert not other.vec_isa_ok and "TORCHINDUCTOR_VEC_ISA_OK" not in os.environ
    job = job_cache.JobCache({"key": "k" * 64, "out": "o.zip", "vec_isa_ok": True, "environment": env},
                             str(tmp_path / "b"))
    job.activate()
    assert job.vec_isa_ok and os.environ["TORCHINDUCTOR_VEC_ISA_OK"] == "1" and job.stats["isa"] == "host"
    job.before_candidate("cpu")  # nothing left to probe
    assert "isa_probe_s" not in job.stats



class _Recording:
    """A runner that records the job it was given and runs nothing."""

    def __init__(self, name: str) -> None:
        self.name, self.jobs = name, []

    def run(self, job):  # type: ignore[no-untyped-def]
        from arbor.sandbox.runner import JobResult

        self.jobs.append(job)
        return JobResult(returncode=1, timed_out=False, duration_s=0.0, stdout_tail="", stderr_tail="no", outputs={})


def test_only_jobs_with_the_hosts_torch_and_compiler_are_told(facts, tmp_path):
    """The local runner's jobs run the host's Python, torch and compiler; a container's may carry
    the same versions and another compiler, so Docker jobs probe themselves."""
    from arbor.sandbox.kernel.compile_store import CompileCache
    from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernel

    data = Path(__file__).parents[1] / "data"
    compiled = (data / "gelu_candidate.py").read_text() + "\n# torch.compile\n"
    req = KernelRequest(problem_source=(data / "gelu_problem.py").read_text(), candidate_source=compiled)
    told = {}
    for name in ("local", "docker"):
        runner = _Recording(name)
        measure_kernel(runner, req, cache=CompileCache(tmp_path / name))
        told[name] = json.loads(runner.jobs[0].files["request.json"])["compile_cache"]
    assert told["local"]["vec_isa_ok"] is True and told["local"]["environment"] == job_cache.environment()
    assert "vec_isa_ok" not in told["docker"] and "environment" not in told["docker"]


@pytest.mark.slow  # a torch.compile on the CPU (27 s on the 2-core CI): on workers, this file starts first
def test_a_batch_child_that_compiles_skips_the_per_process_costs_and_keeps_them_to_itself(facts):
    """``measure_kernels`` (the suite's compare job: eager, compile and best in one harness job)
    has no cache between jobs; its compiling child still gets the precompiled header off and the
    host's ISA verdict, set in that forked child only — its eager sibling sees neither."""
    from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernels
    from arbor.sandbox.runners.local import LocalRunner

    data = Path(__file__).parents[1] / "data"
    problem, good = (data / "gelu_problem.py").read_text(), (data / "gelu_candidate.py").read_text()

    def expecting(isa: str | None, pch: str | None, note: str) -> str:
        check = (f"        import os\n        if (os.environ.get('TORCHINDUCTOR_VEC_ISA_OK'), "
                 f"os.environ.get('TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS')) != ({isa!r}, {pch!r}):\n"
                 "            raise RuntimeError(repr(dict(os.environ)))\n")
        return good.replace("        super().__init__()\n", "        super().__init__()\n" + check) + note

    assert "super().__init__()" in good
    compiled, eager = expecting("1", "0", "\n# torch.compile\n"), expecting(None, None, "\n")
    runner = LocalRunner()
    try:
        a, b = measure_kernels(runner, [KernelRequest(problem, compiled, time_budget_s=0.2, min_repeats=3),
                                        KernelRequest(problem, eager, time_budget_s=0.2, min_repeats=3)])
    finally:
        runner.close()
    assert a.ok, a.error_text
    assert b.ok, b.error_text

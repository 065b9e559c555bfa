"""The compile-artifact cache: keys that never mix candidates, an archive that travels with the
job (shipped in, collected out) through the real local runner, and an unpacker that trusts nothing.

The end-to-end tests use a "compiling" candidate that stands in for Inductor: it mentions
``torch.compile`` (so the protocol uses the cache) and keeps a counter file in the folder the
harness points ``TORCHINDUCTOR_CACHE_DIR`` at, so what its next measurement finds there shows
whether the cache travelled. One real ``torch.compile`` candidate checks the first-call timing.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from arbor.sandbox.kernel import compile_store as cc
from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernel
from arbor.sandbox.runners.local import LocalRunner

DATA = Path(__file__).parents[1] / "data"
PROBLEM = (DATA / "gelu_problem.py").read_text()
GOOD = (DATA / "gelu_candidate.py").read_text()
FAST = dict(time_budget_s=0.3, warmup_s=0.05, min_repeats=5, num_threads=1, timeout_s=120, seeds=[0, 1, 2])
HARNESS_CACHE = Path(cc.__file__).parents[1] / "harness" / "compile_cache.py"


def _harness_module(path: Path = HARNESS_CACHE):
    spec = importlib.util.spec_from_file_location(f"arbor_test_harness_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _counting(tag: str, extra_init: str = "") -> str:
    """A candidate that 'compiles' (torch.compile named, never called): a counter file in its
    cache folder, read at __init__ and written back one higher. The output is the reference's."""
    return f'''import os
import torch
import torch.nn as nn
# compiled with torch.compile in a real campaign; here a counter stands in for the artifacts ({tag})


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        path = os.path.join(os.environ.get("TORCHINDUCTOR_CACHE_DIR", "."), "counter-{tag}.txt")
        seen = int(open(path).read()) if os.path.exists(path) else 0
        with open(path, "w") as f:
            f.write(str(seen + 1))
        self.seen = seen
{extra_init}
    def forward(self, x):
        return torch.nn.functional.gelu(x, approximate="tanh")
'''


def _req(candidate: str, **kw) -> KernelRequest:
    return KernelRequest(PROBLEM, candidate, **{**FAST, **kw})


# --- keys -------------------------------------------------------------------------------------
def test_keys_separate_candidates_and_everything_that_changes_compiled_code():
    compiled = GOOD.replace("class ModelNew", "# torch.compile\nclass ModelNew")
    base = _req(compiled)
    env = {"torch": "2.13.0", "triton": "3.9.0", "python": "3.11.7", "machine": "x86_64", "cpu": "EPYC"}
    key = cc.cache_key(base, "local:", env)
    assert key is not None and len(key) == 64
    assert cc.cache_key(_req(compiled), "local:", dict(env)) == key  # same candidate: same key
    other = compiled + " "  # any other candidate, however close
    changed = [
        replace(base, candidate_source=other),
        replace(base, problem_source=PROBLEM + "\n# edited\n"),
        replace(base, sizes={"N": 64}), replace(base, size_scale=2.0), replace(base, dtype="bfloat16"),
        replace(base, device="cuda:0"), replace(base, num_threads=2),
    ]
    keys = {cc.cache_key(r, "local:", env) for r in changed}
    keys |= {cc.cache_key(base, "local:", {**env, "torch": "2.11.0"}),
             cc.cache_key(base, "local:", {**env, "triton": "3.5.0"}),
             cc.cache_key(base, "docker:sha256:abc", env)}
    assert None not in keys and key not in keys and len(keys) == len(changed) + 3


def test_no_key_where_the_cache_must_not_be_used():
    compiled = GOOD.replace("class ModelNew", "# torch.compile\nclass ModelNew")
    assert cc.cache_key(_req(GOOD), "local:") is None  # compiles nothing: nothing to keep
    assert cc.cache_key(_req(compiled, mode="aa"), "local:") is None  # the baseline's A/A run
    # the reference runs in the same process: a problem that compiles would read the candidate's cache
    assert cc.cache_key(KernelRequest(PROBLEM + "\nM = torch.compile\n", compiled), "local:") is None


def test_store_keeps_one_archive_per_key_and_drops_the_least_recently_used(tmp_path):
    store = cc.CompileCache(tmp_path, max_bytes=250)
    a, b, c = ("a" * 64), ("b" * 64), ("c" * 64)
    assert store.get(a) is None
    assert store.put(a, b"x" * 100) and store.put(b, b"y" * 100)
    assert store.get(a) == b"x" * 100  # touched: now the most recently used
    os.utime(store._path(b), (1, 1))
    assert store.put(c, b"z" * 100)  # 300 bytes > 250: the oldest (b) goes
    assert store.get(b) is None and store.get(a) and store.get(c)
    assert not store.put(a, b"") and not store.put(a, b"0" * (cc.MAX_ENTRY_BYTES + 1))
    with pytest.raises(ValueError):
        store.get("../../etc/passwd")


def test_default_cache_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("ARBOR_COMPILE_CACHE", "off")
    assert cc.default_cache() is None
    monkeypatch.setenv("ARBOR_COMPILE_CACHE", str(tmp_path / "cc"))
    assert cc.default_cache().root == tmp_path / "cc"
    monkeypatch.delenv("ARBOR_COMPILE_CACHE")
    monkeypatch.setenv("ARBOR_CACHE_DIR", str(tmp_path / "base"))
    assert cc.default_cache().root == tmp_path / "base" / "compile"


# --- the job's side: unpacking trusts nothing ------------------------------------------------
def _archive(key: str, files: dict[str, bytes], environment: dict | None = None) -> bytes:
    mod = _harness_module()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(mod.MANIFEST, json.dumps({"key": key, "environment": environment or mod.environment()}))
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _job(tmp_path: Path, archive: bytes | None, key: str = "k" * 64):
    mod = _harness_module()
    tmp_path.mkdir(parents=True, exist_ok=True)
    if archive is not None:
        (tmp_path / "in.zip").write_bytes(archive)
    job = mod.JobCache({"key": key, "in": str(tmp_path / "in.zip") if archive else None,
                        "out": str(tmp_path / "out.zip")}, str(tmp_path))
    env = {k: os.environ.get(k) for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
                                          "TORCHINDUCTOR_FX_GRAPH_CACHE", "TORCHINDUCTOR_AUTOGRAD_CACHE")}
    try:
        job.activate()
    finally:
        for k, v in env.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    return job


def test_archive_round_trip_restores_files_and_repacks_only_new_ones(tmp_path):
    job = _job(tmp_path / "a", None)
    Path(job.root, "inductor", "ab").mkdir(parents=True)
    Path(job.root, "inductor", "ab", "kernel.so").write_bytes(b"\x7fELF")
    stats = job.save()
    assert stats["saved"] and stats["new_files"] == 1
    again = _job(tmp_path / "b", (tmp_path / "a" / "out.zip").read_bytes())
    assert again.stats["status"] == "hit" and again.stats["restored"] == 1
    assert Path(again.root, "inductor", "ab", "kernel.so").read_bytes() == b"\x7fELF"
    assert not (tmp_path / "b" / "in.zip").exists()  # removed once unpacked
    assert again.save()["saved"] is False  # nothing new: nothing to send back


@pytest.mark.parametrize("name", ["../problem.py", "inductor/../../problem.py", "/etc/x", "inductor/a\\..\\b",
                                  "inductor//x"])
def test_unsafe_names_reject_the_whole_archive(tmp_path, name):
    (tmp_path / "problem.py").write_text("reference")
    job = _job(tmp_path, _archive("k" * 64, {"inductor/ok.so": b"1", name: b"poison"}))
    assert job.stats["status"] == "rejected" and not job.restored
    assert (tmp_path / "problem.py").read_text() == "reference"


def test_archive_of_another_key_or_environment_is_not_unpacked(tmp_path):
    job = _job(tmp_path / "a", _archive("x" * 64, {"inductor/ok.so": b"1"}))
    assert job.stats["status"] == "stale" and not Path(job.root, "inductor", "ok.so").exists()
    env = {**_harness_module().environment(), "torch": "0.0.1"}
    job = _job(tmp_path / "b", _archive("k" * 64, {"inductor/ok.so": b"1"}, env))
    assert job.stats["status"] == "stale" and not Path(job.root, "inductor", "ok.so").exists()


def test_a_link_planted_in_the_cache_folder_is_not_followed_when_packing(tmp_path):
    job = _job(tmp_path, None)
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    os.symlink(secret, Path(job.root, "inductor", "leak.txt"))
    Path(job.root, "inductor", "real.so").write_bytes(b"1")
    assert job.save()["saved"]
    with zipfile.ZipFile(tmp_path / "out.zip") as zf:
        assert sorted(zf.namelist()) == [_harness_module().MANIFEST, "inductor/real.so"]


# --- through the local runner ----------------------------------------------------------------
def test_cache_travels_between_measurements_of_the_same_candidate_only(tmp_path):
    store = cc.CompileCache(tmp_path / "cache")
    runner = LocalRunner()
    try:
        first = measure_kernel(runner, _req(_counting("A")), cache=store)
        assert first.ok, first.error_text
        assert first.stats["compile"]["cache"] == "miss" and first.stats["compile_cache"]["kept"]
        # Inductor's vector-ISA verdict came from the host's one probe (sandbox/kernel/vec_isa.py: on a
        # fresh machine its real child ran for this job), not from a probe in this job
        assert first.stats["compile_cache"].get("isa") == "host" and "isa_probe_s" not in first.stats["compile_cache"]
        assert "extensions" not in first.stats["compile_cache"]  # no load_inline: no wrapper, no setuptools import
        second = measure_kernel(runner, _req(_counting("A")), cache=store)
        assert second.ok, second.error_text
        assert second.stats["compile"]["cache"] == "hit" and second.stats["compile_cache"]["restored"] >= 1
        # a different candidate gets its own (empty) cache, never A's
        other = measure_kernel(runner, _req(_counting("B")), cache=store)
        assert other.ok and other.stats["compile"]["cache"] == "miss"
        assert other.stats["compile_cache"]["restored"] == 0
        keys = {cc.cache_key(_req(_counting(t)), cc.runner_identity(runner)) for t in "AB"}
        assert len(keys) == 2 and {p.stem for p in store.entries()} == keys
        with zipfile.ZipFile(io.BytesIO(store.get(cc.cache_key(_req(_counting("A")), "local:")))) as zf:
            assert zf.read("inductor/counter-A.txt") == b"2"  # the second measurement saw the first's
        off = measure_kernel(runner, _req(_counting("A")), cache=None)
        assert off.ok and off.stats["compile"]["cache"] == "off"
    finally:
        runner.close()


def test_a_profile_loads_what_the_measurements_compiled_and_writes_nothing_back(tmp_path, monkeypatch):
    """A new best is profiled: with its measurements' archive shipped in, the profile loads instead
    of compiling again (seen on the quickstart: 15-18 s a profile of a compiled best, 4 per run)."""
    from arbor.sandbox.kernel.profile_job import profile_job, run_profile

    monkeypatch.setenv("ARBOR_COMPILE_CACHE", str(tmp_path / "cache"))
    store = cc.default_cache()
    runner = LocalRunner()
    try:
        req = _req(_counting("P"))
        assert measure_kernel(runner, req, cache=store).stats["compile_cache"]["kept"]
        key = cc.cache_key(req, cc.runner_identity(runner))
        kept = store.get(key)
        prof = run_profile(runner, req)
        assert "error" not in prof, prof
        assert prof["compile_cache"] == "hit"
        assert store.get(key) == kept  # read only: the profile sent nothing back
        assert run_profile(runner, replace(req, reuse_compiled=False))["compile_cache"] == "off"
        job = profile_job(req, "n", cache_key=key, archive=kept)
        assert job.files[cc.ARCHIVE_IN] == kept and job.collect == ["profile.json"]
        assert cc.ARCHIVE_IN not in profile_job(req, "n").files
    finally:
        runner.close()


def test_a_candidate_cannot_read_the_host_cache_folder(tmp_path):
    """The archive is shipped as a file of the job; the host folder itself stays out of reach
    (Landlock), so no candidate can read another candidate's archive."""
    runner = LocalRunner()
    if "landlock_fs" not in runner.plan.layers:
        runner.close()
        pytest.skip("Landlock unavailable: the local sandbox cannot confine reads here")
    store = cc.CompileCache(tmp_path / "cache")
    probe = (f'        try:\n            open({str(tmp_path / "cache")!r} + "/probe").read()\n'
             f'            raise RuntimeError("read the host cache folder")\n'
             f'        except (PermissionError, FileNotFoundError) as e:\n'
             f'            if isinstance(e, FileNotFoundError):\n'
             f'                raise RuntimeError("the host cache folder is visible")\n')
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "probe").write_text("another candidate's archive")
    try:
        m = measure_kernel(runner, _req(_counting("C", probe)), cache=store)
        assert m.ok, m.error_text
    finally:
        runner.close()


def test_a_poisoned_archive_is_refused_and_the_measurement_stands(tmp_path):
    store = cc.CompileCache(tmp_path / "cache")
    req = _req(_counting("D"))
    runner = LocalRunner()
    try:
        key = cc.cache_key(req, cc.runner_identity(runner))
        harness = _harness_module()
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:  # would replace the reference with a slow one
            zf.writestr(harness.MANIFEST, json.dumps({"key": key, "environment": harness.environment()}))
            zf.writestr("../problem.py", "import time\n" + PROBLEM.replace("return", "time.sleep(0.01); return"))
        store.put(key, buf.getvalue())
        m = measure_kernel(runner, req, cache=store)
        assert m.ok, m.error_text
        assert m.stats["compile"]["cache"] == "rejected"
    finally:
        runner.close()


@pytest.mark.slow
def test_a_compiled_candidate_reports_its_compile_apart_from_timing(tmp_path):
    """A real torch.compile candidate: its first call (the compile) is recorded, and far exceeds
    its timed per-call samples; the second measurement loads from the cache."""
    compiled = "import torch\n" + GOOD.replace("class ModelNew(nn.Module):", "class _Eager(nn.Module):") + (
        "\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.inner = torch.compile(_Eager())\n\n    def forward(self, x):\n        return self.inner(x)\n")
    store = cc.CompileCache(tmp_path / "cache")
    runner = LocalRunner()
    try:
        first = measure_kernel(runner, _req(compiled, timeout_s=300), cache=store)
        assert first.ok, first.error_text
        c = first.stats["compile"]
        assert c["cache"] == "miss" and c["compile_s"] > 0.5
        assert c["compile_s"] > 100 * max(first.candidate_samples)  # not in the timed samples
        second = measure_kernel(runner, _req(compiled, timeout_s=300), cache=store)
        assert second.ok and second.stats["compile"]["cache"] == "hit"
        assert second.stats["compile_cache"]["restored"] > 0
    finally:
        runner.close()


def test_activation_points_inductor_at_the_cache_and_skips_per_process_work(tmp_path, monkeypatch):
    """The precompiled header lives outside TORCHINDUCTOR_CACHE_DIR and is preprocessed again in
    every process, so the job turns it off; the ISA probe is skipped only when the archive says it
    passed under this very key and environment."""
    names = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS",
             "TORCHINDUCTOR_VEC_ISA_OK", "TORCHINDUCTOR_FX_GRAPH_CACHE", "TORCHINDUCTOR_AUTOGRAD_CACHE")
    for n in names:  # monkeypatch restores whatever activate() sets
        monkeypatch.setenv(n, "x")
        monkeypatch.delenv(n)
    mod = _harness_module()
    job = mod.JobCache({"key": "k" * 64, "in": None, "out": str(tmp_path / "o.zip")}, str(tmp_path))
    job.activate()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == os.path.join(job.root, "inductor")
    assert os.environ["TRITON_CACHE_DIR"] == os.path.join(job.root, "triton")
    assert os.environ["TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS"] == "0"
    assert "TORCHINDUCTOR_VEC_ISA_OK" not in os.environ
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(mod.MANIFEST, json.dumps({"key": "k" * 64, "environment": mod.environment(), "vec_isa_ok": True}))
        zf.writestr("inductor/a.so", b"1")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "in.zip").write_bytes(buf.getvalue())
    again = mod.JobCache({"key": "k" * 64, "in": str(tmp_path / "b" / "in.zip"), "out": "o.zip"}, str(tmp_path / "b"))
    again.activate()
    assert again.stats["status"] == "hit" and os.environ["TORCHINDUCTOR_VEC_ISA_OK"] == "1"


def test_settings_inductor_read_at_import_are_set_on_its_config_when_it_is_loaded_already(tmp_path, monkeypatch):
    """A warm worker's ``compiler`` extra imports Inductor before the job sets its variables: the
    job then sets the same values on the config objects (else every process would preprocess the
    precompiled header again, ~15 s, and probe the ISA). A value the job's environment gave wins."""
    import types

    for n in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS",
              "TORCHINDUCTOR_VEC_ISA_OK", "TORCHINDUCTOR_FX_GRAPH_CACHE", "TORCHINDUCTOR_AUTOGRAD_CACHE"):
        monkeypatch.setenv(n, "x")
        monkeypatch.delenv(n)
    config = types.ModuleType("torch._inductor.config")
    config.cpp_cache_precompile_headers, config.fx_graph_cache = True, False
    config.cpp = types.SimpleNamespace(vec_isa_ok=None)
    functorch_config = types.ModuleType("torch._functorch.config")
    functorch_config.enable_autograd_cache = False
    monkeypatch.setitem(sys.modules, "torch._inductor.config", config)
    monkeypatch.setitem(sys.modules, "torch._functorch.config", functorch_config)
    mod = _harness_module()
    env = mod.environment()
    job = mod.JobCache({"key": "k" * 64, "in": None, "out": str(tmp_path / "o.zip"), "vec_isa_ok": True,
                        "environment": env}, str(tmp_path))
    job.activate()
    assert config.cpp_cache_precompile_headers is False and config.cpp.vec_isa_ok is True
    assert config.fx_graph_cache is True and functorch_config.enable_autograd_cache is True
    monkeypatch.setenv("TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS", "1")  # the job's own choice
    mod.settle({})  # a batch child's request names no vec-ISA verdict
    assert config.cpp_cache_precompile_headers is True


def test_load_inline_builds_into_the_cache_folder_under_a_digest_of_what_shapes_the_binary(tmp_path, monkeypatch):
    """The job wraps ``load_inline`` (a candidate's extension kept between its measurements): a
    call without a build folder of its own builds into ``extensions/<digest>``; what does not
    shape the binary (``verbose``) keeps the digest, a different source gets another; a call that
    names its own build folder, or builds no Python module, goes to torch untouched. (The load on a
    later job is the sandbox test in test_extension_liveness.py: it needs a real build.)"""
    import torch.utils.cpp_extension as cpp

    calls = []

    def fake(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None, build_directory=None,
             verbose=False, is_python_module=True, **rest):
        calls.append((name, build_directory))
        return f"module {name}"

    monkeypatch.setattr(cpp, "load_inline", fake)
    folder = tmp_path / "extensions"
    counts = _harness_module(HARNESS_CACHE.with_name("extension_cache.py")).cache_extensions(str(folder))
    assert cpp.load_inline is not fake and counts == {"built": 0, "loaded": 0}
    assert cpp.load_inline("ext_a", "int f();", functions=["f"]) == "module ext_a"
    cpp.load_inline("ext_a", "int f();", functions=["f"], verbose=True)
    cpp.load_inline("ext_a", "int g();", functions=["g"])
    built = [Path(d) for _, d in calls]
    assert all(d.parent == folder for d in built) and built[0] == built[1] != built[2]
    assert (built[0] / "arbor-built").read_text() == "ext_a" and counts["built"] == 3
    calls.clear()
    cpp.load_inline("ext_b", "int f();", build_directory=str(tmp_path / "mine"))
    cpp.load_inline("ext_c", "int f();", is_python_module=False)
    assert calls == [("ext_b", str(tmp_path / "mine")), ("ext_c", None)] and counts["built"] == 3

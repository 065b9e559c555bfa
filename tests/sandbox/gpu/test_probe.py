"""The device probe: does the GPU start under each isolation layer, and which plan does the runner
take? With a fake at the level "device job under plan P → ok / error text" for every outcome, and
through the real runner with a fake *device job script* that fails under given layers."""

from __future__ import annotations

import json

import pytest

from arbor.sandbox.runners import isolation
from arbor.sandbox.gpu import device_check
from arbor.sandbox.gpu import probe as probe_mod
from arbor.sandbox.gpu import probe_cache
from arbor.sandbox.gpu.device_check import check_container, check_local
from arbor.sandbox.gpu.probe import DRIVER_FIX, DeviceProbe, decide
from arbor.sandbox.gpu.probe_cache import ProbeCache
from arbor.sandbox.runners.isolation import KernelSupport, plan_for
from arbor.sandbox.runners.local import LocalRunner
from arbor.sandbox.runner import JobResult, SandboxError

from tests.sandbox.fakes.device_job import fake_device_host

ROOT = KernelSupport(landlock_abi=7, netns=True, seccomp=True)
FULL = plan_for("none", "isolate", ROOT)
ERR = "RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 304: OS call failed"


class FakeDevice:
    """The device job's answer under a plan: it fails whenever the plan holds a layer in
    ``breaks`` (or always, or bare too). Records every plan it was asked about."""

    def __init__(self, breaks=(), bare=True, base=True, combo=None):
        self.breaks, self.bare, self.base, self.combo = set(breaks), bare, base, combo
        self.asked: list = []

    def __call__(self, plan):
        self.asked.append(plan)
        if plan is None:
            return (True, "") if self.bare else (False, "RuntimeError: Found no NVIDIA driver on your system")
        if not self.base:
            return False, ERR
        if self.breaks & set(plan.layers):
            return False, ERR
        if self.combo and self.combo <= set(plan.layers):
            return False, ERR
        return True, ""


def labels(p: DeviceProbe) -> dict[str, bool]:
    return {a.label: a.ok for a in p.attempts}


# ----------------------------------------------------------------------------- decide(), every outcome
def test_all_layers_work_keeps_the_full_plan_with_two_jobs():
    fake = FakeDevice()
    p = decide(FULL, fake, device="cuda", kernel=ROOT)
    assert p.chosen == FULL and p.notice is None and p.stop is None
    assert list(labels(p)) == ["bare", "full"]
    assert "starts under" in p.summary()


def test_broken_network_namespace_is_replaced_by_seccomp_and_landlock_tcp():
    p = decide(FULL, FakeDevice(breaks={"netns"}), device="cuda", kernel=ROOT)
    assert p.broken == ["netns"]
    assert p.chosen == FULL.without("netns").with_layer("seccomp_net")
    assert p.chosen.landlock_tcp and p.chosen.landlock_fs and p.chosen.scope_abstract_unix
    seen = labels(p)
    assert seen["only netns"] is False and seen["only seccomp_net"] is True and seen["chosen"] is True
    assert p.notice.count("\n") == 0
    assert "private network namespace" in p.notice and "seccomp network filter + Landlock TCP rules" in p.notice
    assert "Error 304" in p.notice and "isolation now:" in p.notice


def test_broken_abstract_unix_scope_is_dropped_and_the_netns_makes_it_good():
    p = decide(FULL, FakeDevice(breaks={"scope_abstract_unix"}), device="cuda", kernel=ROOT)
    assert p.chosen == FULL.without("scope_abstract_unix")
    seen = labels(p)
    # the record the next GPU session confirms the hypothesis with: each scope bit on its own
    assert seen["only scope_abstract_unix"] is False and seen["only scope_signal"] is True
    assert seen["only landlock_fs"] is True and seen["without scope_abstract_unix"] is True
    assert "confined to the candidate's own network namespace" in p.notice
    assert "filesystem, TCP, signal scope" in p.notice  # what stays


def test_broken_abstract_scope_without_netns_says_the_loss_is_real():
    full = plan_for("host", "isolate", ROOT)
    p = decide(full, FakeDevice(breaks={"scope_abstract_unix"}), device="cuda", network="host", kernel=ROOT)
    assert p.chosen == full.without("scope_abstract_unix") and p.stop is None
    assert "abstract unix sockets of host processes" in p.notice


@pytest.mark.parametrize("layer, fix", [
    ("landlock_fs", "sandbox.filesystem: host"),
    ("scope_signal", "sandbox.kind: docker"),
])
def test_nothing_safe_starts_the_device_stops_with_the_fix(layer, fix):
    p = decide(FULL, FakeDevice(breaks={layer}), device="cuda", kernel=ROOT)
    assert p.chosen is None and p.notice is None
    assert p.stop.count("\n") == 0 and "does not start inside the local sandbox" in p.stop
    assert f"fix: sandbox.kind: docker" in p.stop and fix in p.stop


def test_broken_netns_without_a_working_seccomp_filter_stops():
    p = decide(FULL, FakeDevice(breaks={"netns", "seccomp_net"}), device="cuda", kernel=ROOT)
    assert p.chosen is None and "network isolation" in p.stop and "sandbox.network: host" in p.stop


def test_write_rules_under_filesystem_host_are_dropped_with_a_notice():
    full = plan_for("none", "host", ROOT)
    p = decide(full, FakeDevice(breaks={"landlock_fs"}), device="cuda", filesystem="host", kernel=ROOT)
    assert p.chosen == full.without("landlock_fs") and "write outside their workdir" in p.notice


def test_device_absent_even_bare_stops_naming_the_driver():
    fake = FakeDevice(bare=False)
    p = decide(FULL, fake, device="cuda", kernel=ROOT)
    assert fake.asked == [None]  # nothing else is tried
    assert "does not start on this machine even outside the sandbox" in p.stop and DRIVER_FIX in p.stop
    assert "Found no NVIDIA driver" in p.stop


def test_runner_base_itself_breaking_the_device_stops():
    p = decide(FULL, FakeDevice(base=False), device="cuda", kernel=ROOT)
    assert labels(p)["base"] is False and "even with no isolation layer" in p.stop


def test_only_a_combination_failing_gives_up_the_cheapest_layer():
    p = decide(FULL, FakeDevice(combo={"netns", "scope_abstract_unix"}), device="cuda", kernel=ROOT)
    assert p.broken == ["scope_abstract_unix"] and p.chosen == FULL.without("scope_abstract_unix")


def test_exhaustive_records_every_layer_even_when_all_work():
    p = decide(FULL, FakeDevice(), device="cuda", kernel=ROOT, exhaustive=True)
    seen = labels(p)
    for layer in FULL.layers:
        assert seen[f"only {layer}"] and seen[f"without {layer}"]
    assert seen["only seccomp_net"] and p.chosen == FULL


# ----------------------------------------------------------------------------- the real runner path
@pytest.fixture(scope="module")
def host():
    h = fake_device_host()
    yield h
    h.close()


def test_real_jobs_find_the_layer_that_breaks_the_device(host, tmp_path):
    if isolation.landlock_abi() < 6:
        pytest.skip("needs Landlock ABI >= 6")
    with LocalRunner(network="host", device_check=False) as r:
        p = check_local(r, "cuda", code=host.job({"scope_abstract_unix"}), cache=ProbeCache(tmp_path / "c.json"))
        assert r.plan == r.full_plan.without("scope_abstract_unix") and p.notice in r.notices
        private = r.full_plan.private_ns  # where this machine gives jobs private namespaces
    seen = labels(p)
    assert seen == {"bare": True, "full": False, "only landlock_fs": True, "only scope_signal": True,
                    "only scope_abstract_unix": False, "without scope_abstract_unix": True,
                    **({"only private_ns": True} if private else {})}
    failed = next(a for a in p.attempts if a.label == "only scope_abstract_unix")
    assert "under scope_abstract_unix" in failed.error  # the fake's own error line, carried through
    assert "Error 304" in p.notice


def test_real_jobs_replace_a_broken_netns_and_candidates_stay_offline(host, tmp_path):
    if not (isolation.netns_available() and isolation.seccomp_available()):
        pytest.skip("needs root (network namespace) and seccomp")
    with LocalRunner(device_check=False) as r:
        p = check_local(r, "cuda", code=host.job({"netns"}), cache=ProbeCache(tmp_path / "c.json"))
        assert p.broken == ["netns"] and r.plan.seccomp_net and not r.plan.netns
        # the fake device job, run normally now, finds exactly the replacement layers
        res = r.run(probe_mod.device_job("cuda", host.job(())))
    assert res.returncode == 0
    found = res.stdout_tail.split("layers: ")[1].split()[0].split(",")
    assert "seccomp_net" in found and "netns" not in found and "landlock_fs" in found


def test_runner_for_cuda_stops_in_its_constructor_when_nothing_safe_works(host, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(probe_mod, "DEVICE_JOB", host.job({"landlock_fs"}))
    with pytest.raises(SandboxError) as exc:
        LocalRunner(device="cuda")
    msg = str(exc.value)
    assert "\n" not in msg and "Landlock filesystem rules" in msg and "sandbox.filesystem: host" in msg
    monkeypatch.setattr(probe_mod, "DEVICE_JOB", "import sys; sys.exit('RuntimeError: no CUDA GPUs are available')")
    with pytest.raises(SandboxError, match="even outside the sandbox .*no CUDA GPUs"):
        LocalRunner(device="cuda")


# ----------------------------------------------------------------------------- the cache
def test_cache_hit_miss_and_invalidation_on_a_changed_key(tmp_path, monkeypatch):
    version = tmp_path / "version"
    version.write_text("580.159.04\n")
    monkeypatch.setattr(probe_cache, "NVIDIA_VERSION_FILES", (str(version),))
    cache = ProbeCache(tmp_path / "cache.json")
    with LocalRunner(device_check=False) as r:
        fake = FakeDevice(breaks={"scope_abstract_unix"})
        first = check_local(r, "cuda", try_plan=fake, cache=cache)
        assert not first.cached and len(fake.asked) > 2
        key = json.loads(cache.path.read_text())
        assert [e["key"]["driver"] for e in key.values()] == ["580.159.04"]

        fake.asked.clear()
        again = check_local(r, "cuda", try_plan=fake, cache=cache)  # same machine, driver, settings
        assert again.cached and fake.asked == [] and again.chosen == first.chosen and again.notice == first.notice

        version.write_text("580.200.01\n")  # a driver upgrade: the answer may differ
        fresh = check_local(r, "cuda", try_plan=fake, cache=cache)
        assert not fresh.cached and fake.asked
    with LocalRunner(network="host", device_check=False) as r:  # other settings: other key
        fake.asked.clear()
        assert not check_local(r, "cuda", try_plan=fake, cache=cache).cached and fake.asked
    assert len(json.loads(cache.path.read_text())) == 3


def test_cache_skips_a_device_absent_bare_and_survives_a_corrupt_file(tmp_path):
    cache = ProbeCache(tmp_path / "cache.json")
    cache.path.write_text("{not json")
    with LocalRunner(device_check=False) as r:
        fake = FakeDevice(bare=False)
        assert check_local(r, "cuda", try_plan=fake, cache=cache).stop
        assert check_local(r, "cuda", try_plan=fake, cache=cache).stop and len(fake.asked) == 2  # asked again
        ok = FakeDevice()
        check_local(r, "cuda", try_plan=ok, cache=cache)
    assert len(json.loads(cache.path.read_text())) == 1


def test_driver_version_from_proc(tmp_path, monkeypatch):
    proc = tmp_path / "version"
    proc.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
                    "(dvs-builder@U22)  Thu Oct 30 2025\nGCC version:  gcc version 12.3.0\n")
    monkeypatch.setattr(probe_cache, "NVIDIA_VERSION_FILES", (str(tmp_path / "absent"), str(proc)))
    assert probe_cache.driver_version() == ("nvidia", "580.159.04")


# ----------------------------------------------------------------------------- Docker
class _FakeContainerRunner:
    name = "docker"

    def __init__(self, result=None, error=None):
        self.result, self.error, self.jobs = result, error, []

    def run(self, job):
        self.jobs.append(job)
        if self.error:
            raise self.error
        return self.result


def _result(rc, out="", err=""):
    return JobResult(returncode=rc, timed_out=False, duration_s=0.1, stdout_tail=out, stderr_tail=err, outputs={})


def test_container_check_passes_or_stops_naming_the_container_toolkit():
    ok = check_container(_FakeContainerRunner(_result(0, "ARBOR_DEVICE_OK 1 2.0")), "cuda:1")
    assert ok.stop is None
    bad = check_container(_FakeContainerRunner(_result(1, err=ERR)), "cuda")
    assert "inside the Docker sandbox container" in bad.stop and "NVIDIA container toolkit" in bad.stop
    assert "Error 304" in bad.stop
    start = check_container(_FakeContainerRunner(error=SandboxError(
        "docker: cannot start a sandbox container from x: could not select device driver \"\" with capabilities: "
        "[[gpu]] — fix it")), "cuda")
    assert "could not select device driver" in start.stop and "--gpus" in start.stop


# ----------------------------------------------------------------------------- the JSON-lines entry
def test_probe_entry_prints_every_attempt_as_json(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(probe_mod, "DEVICE_JOB", f"print({probe_mod.OK_MARK!r})")
    assert device_check.main(["--network", "host", "--filesystem", "host"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert "kernel" in lines[0] and lines[-1]["stop"] is None
    assert [d["label"] for d in lines[1:-1]][:2] == ["bare", "full"] and all(d["ok"] for d in lines[1:-1])

"""Image recipes and Docker runner configuration, without an engine."""

from __future__ import annotations

import io
import os
import sys
import tarfile

import pytest

from arbor.sandbox.runners import images
from arbor.sandbox.runners.images import DOCKERFILES, SANDBOX_UID, resolve_image
from arbor.sandbox.runner import SandboxError, make_runner


def test_host_recipe_borrows_the_interpreter_read_only():
    plan = resolve_image("host")
    assert plan.recipe == "host" and plan.ref.startswith("arbor-sandbox:host-")
    assert plan.python == sys.executable and plan.user == f"{SANDBOX_UID}:{SANDBOX_UID}"
    targets = {dst for _src, dst in plan.mounts}
    assert "/usr" in targets
    assert any(sys.executable.startswith(t.rstrip("/") + "/") for t in targets)
    home = os.path.expanduser("~")
    assert not any(t == home or (t.startswith(home + "/") and not sys.prefix.startswith(t)) for t in targets)
    assert resolve_image("host").ref == plan.ref  # deterministic: the tag is a hash of the recipe


def test_host_context_is_a_skeleton_root():
    with tarfile.open(fileobj=io.BytesIO(images._host_context())) as tar:
        names = tar.getnames()
        passwd = tar.extractfile("rootfs/etc/passwd").read().decode()
        work = tar.getmember("rootfs/work")
        links = {m.name: m.linkname for m in tar.getmembers() if m.issym()}
    assert "Dockerfile" in names and f"arbor:x:{SANDBOX_UID}:{SANDBOX_UID}" in passwd
    assert work.uid == SANDBOX_UID
    for name in ("bin", "lib"):
        if os.path.islink(f"/{name}"):
            assert links[f"rootfs/{name}"] == os.readlink(f"/{name}")


def test_recipe_change_changes_the_tag(monkeypatch, tmp_path):
    for name in ("host", "cpu", "cuda"):
        (tmp_path / f"Dockerfile.{name}").write_text((DOCKERFILES / f"Dockerfile.{name}").read_text())
    monkeypatch.setattr(images, "DOCKERFILES", tmp_path)
    before = resolve_image("cpu").ref
    (tmp_path / "Dockerfile.cpu").write_text((tmp_path / "Dockerfile.cpu").read_text() + "\n# edited\n")
    assert resolve_image("cpu").ref != before and before.startswith("arbor-sandbox:cpu-")


def test_dockerfiles_run_unprivileged_and_name_their_python():
    for name in ("cpu", "cuda", "host"):
        text = (DOCKERFILES / f"Dockerfile.{name}").read_text()
        assert f"USER {SANDBOX_UID}:{SANDBOX_UID}" in text
        assert name == "host" or "arbor.python=" in text
    assert "FROM scratch" in (DOCKERFILES / "Dockerfile.host").read_text()


def test_user_image_is_taken_as_is():
    plan = resolve_image("registry.local/kernels:1", python="/opt/py/bin/python")
    assert plan.recipe is None and plan.ref == "registry.local/kernels:1" and plan.mounts == []
    assert plan.python == "/opt/py/bin/python"


def test_no_engine_is_one_line_with_the_fix():
    with pytest.raises(SandboxError) as exc:
        make_runner("docker", base_url="unix:///nonexistent/docker.sock")
    msg = str(exc.value)
    assert "\n" not in msg and "no engine at unix:///nonexistent/docker.sock" in msg and "start dockerd" in msg


def test_spec_sandbox_section_maps_to_runner_options(tmp_path):
    from arbor.spec_runners import runner_options
    from arbor.spec import SpecError, parse_spec

    (tmp_path / "p.py").write_text("x = 1\n")
    spec = parse_spec({"name": "d", "target": {"problem": "p.py", "device": "cuda"},
                       "sandbox": {"kind": "docker", "memory_gb": 4, "max_file_mb": 16,
                                   "docker": {"image": "cuda", "cpus": 2, "warm": False},
                                   "clocks": "lock", "clock_targets": {"graphics_mhz": 1410}}}, "d.yaml", tmp_path)
    opts = runner_options(spec)
    assert opts["image"] == "cuda" and opts["device"] == "cuda" and opts["campaign"] == "d"
    assert opts["cpus"] == 2 and opts["warm"] is False and opts["memory_gb"] == 4
    assert opts["max_file_bytes"] == 16 << 20
    local = runner_options(parse_spec({"name": "l", "target": {"problem": "p.py"}}, "l.yaml", tmp_path))
    assert local == {"network": "none", "filesystem": "isolate", "max_processes": 512,
                     "max_open_files": 1024, "max_file_bytes": 1024 << 20, "device": "cpu"}
    with pytest.raises(SpecError, match="sandbox.clocks"):
        parse_spec({"name": "x", "target": {"problem": "p.py"}, "sandbox": {"clocks": "pin"}}, "x.yaml", tmp_path)
    with pytest.raises(SpecError, match="sandbox.docker.gpus"):
        parse_spec({"name": "x", "target": {"problem": "p.py"}, "sandbox": {"docker": {"gpus": 1}}}, "x.yaml",
                   tmp_path)

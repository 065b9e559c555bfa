"""pytest fixtures over the fakes: a machine factory, the NVML shim installed as ``pynvml``, and
the CLIs on PATH. Import them into a conftest (or a test module) to use them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .cli import install_cli
from .machine import FakeMachine, h100_sxm
from .nvml import fake_pynvml


@pytest.fixture
def machine(tmp_path):
    """``machine(gpus=[...], root=..., ...)`` -> a saved FakeMachine (two H100 SXM by default)."""

    def make(gpus=None, **modes) -> FakeMachine:  # type: ignore[no-untyped-def]
        return FakeMachine(tmp_path / "gpus.json", gpus if gpus is not None else [h100_sxm(0), h100_sxm(1)],
                           **modes).save()

    return make


@pytest.fixture
def nvml(monkeypatch):
    """``nvml(machine)`` installs the shim as the ``pynvml`` module and returns it."""

    def install(m: FakeMachine):  # type: ignore[no-untyped-def]
        mod = fake_pynvml(m)
        monkeypatch.setitem(sys.modules, "pynvml", mod)
        return mod

    return install


@pytest.fixture
def smi_on_path(monkeypatch, tmp_path):
    """``smi_on_path(machine, "nvidia-smi" | "amd-smi")`` puts the fake CLI first on PATH (and
    hides nvidia-ml-py, so open_backend("auto") reaches the CLI)."""

    def install(m: FakeMachine, name: str) -> str:
        exe = install_cli(tmp_path / "bin", m, name)
        monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
        monkeypatch.setitem(sys.modules, "pynvml", None)
        return exe

    return install


@pytest.fixture
def device_starts(monkeypatch, tmp_path):
    """On a machine without a GPU, let a ``device: cuda`` runner pass its device check: the probe's
    device job becomes one that always starts (``fakes/device_job.py`` has ones that do not), and
    its cache lives in ``tmp_path``. Returns the cache path."""
    from arbor.sandbox.gpu import probe

    monkeypatch.setattr(probe, "DEVICE_JOB", f"print({probe.OK_MARK!r})\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    return tmp_path / "xdg-cache" / "arbor" / "device_probe.json"


@pytest.fixture
def libnvml(tmp_path):
    """``libnvml(old_driver=False)`` -> the path of a compiled stand-in for libnvidia-ml.so.1
    (``libnvml_fake.c``: NVML's C signatures, one GPU whose readings ``fake_nvml_set`` sets)."""

    def build(old_driver: bool = False) -> str:
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            pytest.skip("no C compiler to build the NVML stand-in")
        out = tmp_path / f"libnvml_fake{'_old' if old_driver else ''}.so"
        src = Path(__file__).with_name("libnvml_fake.c")
        subprocess.run([cc, "-shared", "-fPIC", "-O1", *(["-DOLD_DRIVER"] if old_driver else []), "-o", str(out),
                        str(src)], check=True, capture_output=True)
        return str(out)

    return build

"""pytest fixtures over the fakes: a machine factory, the NVML shim installed as ``pynvml``, and
the CLIs on PATH. Import them into a conftest (or a test module) to use them."""

from __future__ import annotations

import sys

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

from tests.sandbox.fakes.fixtures import device_starts, libnvml, machine, nvml, smi_on_path  # noqa: F401

import dataclasses  # noqa: E402

import pytest  # noqa: E402

from arbor.sandbox.runners import isolation  # noqa: E402


@pytest.fixture(scope="module")
def host_pids():
    """Runners built meanwhile give jobs no private PID namespace: for tests that follow a job's
    processes by the pids the job reports (inside its namespace they are 1, 2, ...); the layer
    itself is tested in runners/test_private_ns.py."""
    real = isolation.kernel_support
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(isolation, "kernel_support", lambda: dataclasses.replace(real(), private_ns=False))
        yield

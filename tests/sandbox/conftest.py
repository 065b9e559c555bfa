from tests.sandbox.fakes.fixtures import device_starts, libnvml, machine, nvml, smi_on_path  # noqa: F401

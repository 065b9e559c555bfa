from tests.sandbox.fakes.fixtures import libnvml, machine, nvml, smi_on_path  # noqa: F401

from tests.sandbox.fakes.fixtures import machine, nvml, smi_on_path  # noqa: F401

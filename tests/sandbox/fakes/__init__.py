"""Fake GPU drivers that behave as the vendors document, shared by the GPU-path tests.

One simulated machine (``FakeMachine``, state in a JSON file so the CLI fakes and the Python
shim see the same GPUs) is reachable three ways: an NVML shim at the ``nvidia-ml-py`` API
(``fake_pynvml``), a ``nvidia-smi`` executable and an ``amd-smi`` executable put on PATH.
"""

from .machine import FakeGpu, FakeMachine, h100_sxm, mi300x  # noqa: F401
from .nvml import fake_pynvml  # noqa: F401
from .cli import install_cli  # noqa: F401

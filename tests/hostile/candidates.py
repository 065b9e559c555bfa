"""Hostile candidates: each one a KernelBench solution that attacks the sandbox instead of (or as
well as) computing the answer, with the diagnosis a contained run must produce.

Shared by the local and Docker suites, so both runners are held to the same standard.
"""

from __future__ import annotations

from dataclasses import dataclass

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
'''


def candidate(forward: str, header: str = "") -> str:
    return (f"import os\nimport sys\nimport torch\nimport torch.nn as nn\n{header}\n\n"
            "class ModelNew(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n\n"
            f"    def forward(self, x):\n        {forward}\n")


@dataclass(frozen=True)
class Hostile:
    name: str
    source: str
    diagnosis: str  # the error_class a contained run must report ("ok": measured normally)
    text: str = ""  # a substring the error text must contain
    timeout_s: float = 90  # generous: a loaded 2-core box imports torch slowly


def hostiles(secret_path: str, port: int) -> list[Hostile]:
    """``secret_path``: a file outside the workdir; ``port``: a loopback listener that must stay
    silent. The env secret is ``ARBOR_HOSTILE_SECRET`` in the parent's environment."""
    return [
        Hostile("infinite_loop", candidate("while True:\n            pass"), "timeout", timeout_s=5),
        Hostile("fork_bomb", candidate("while True:\n            try:\n                os.fork()\n"
                                       "            except OSError:\n                pass"), "timeout", timeout_s=5),
        Hostile("memory_hog", candidate("b = bytearray(6 << 30)\n        return torch.relu(x)"), "oom"),
        Hostile("disk_filler", candidate(
            "fd = os.open('fill.bin', os.O_WRONLY | os.O_CREAT)\n"
            "        while True:\n            os.write(fd, bytes(1 << 20))"), "runtime_error", "File too large"),
        Hostile("network_call", candidate(
            f"import socket\n        socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
            "        return torch.relu(x)"), "runtime_error"),
        Hostile("env_secret", candidate(
            "raise RuntimeError('env:' + os.environ.get('ARBOR_HOSTILE_SECRET', 'no-secret-visible'))"),
            "runtime_error", "no-secret-visible"),
        Hostile("file_outside_workdir", candidate(
            f"raise RuntimeError('file:' + open({secret_path!r}).read())"), "runtime_error"),
        Hostile("kill_parent", candidate("os.kill(os.getppid(), 9)\n        return torch.relu(x)"),
                "runtime_error"),
        Hostile("stdout_1gb", candidate("return torch.relu(x)",  # 1 GiB on stdout at import
                                        header="for _ in range(64):\n    os.write(1, b'x' * (1 << 24))"), "ok"),
    ]


CUDA_HANG = candidate("torch.cuda._sleep(1 << 62)\n        return torch.relu(x)")

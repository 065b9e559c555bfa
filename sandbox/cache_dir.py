"""Where Arbor keeps what it learns about a machine between runs: compile archives, measured
device peaks, the device probe's verdicts, Inductor's vector-ISA verdict.

One rule for all of them, so a user who moves Arbor's caches (``ARBOR_CACHE_DIR``, else
``$XDG_CACHE_HOME/arbor``, else ``~/.cache/arbor``) moves every one: three modules each had their
own copy of it, and the device probe's ignored ``ARBOR_CACHE_DIR``.
"""

from __future__ import annotations

import os
from pathlib import Path


def arbor_cache_dir() -> Path:
    base = os.environ.get("ARBOR_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "arbor")
    return Path(base)

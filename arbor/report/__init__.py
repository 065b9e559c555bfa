"""``arbor report`` and ``arbor export``: a campaign, written down.

* ``data``    — gather a campaign from a (read-only) store in a few bulk queries;
* ``plots``   — matplotlib figures as PNG bytes;
* ``render``  — the self-contained HTML and the Markdown (+ PNG files) report;
* ``export``  — nodes, measurements and verdicts as JSON or CSV;
* ``knowledge``, ``profile`` — the warm-start/calibration and bottleneck-profile sections.
"""

from importlib import import_module

_EXPORTS = {"ReportData": "data", "load": "data", "ReportFiles": "render", "write_report": "render"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    # lazy: ``arbor export`` should not import matplotlib
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(name)

"""Text charts for the terminal: a sparkline and a multi-row column chart.

Both stretch or bucket the series to the width they are given, so the same data reads well in
an 80-column tmux pane and on a 250-column monitor.
"""

from __future__ import annotations

import math

BLOCKS = " ▁▂▃▄▅▆▇█"


def fit(values: list[float], width: int) -> list[float]:
    """Resample ``values`` to exactly ``width`` points: stretch a short series, and keep the last
    value of each bucket of a long one (a best-so-far series stays exact at its right end)."""
    n = len(values)
    if n == 0 or width <= 0:
        return []
    return [values[min(n - 1, ((i + 1) * n - 1) // width)] for i in range(width)]


def _bounds(values: list[float], lo: float | None, hi: float | None) -> tuple[float, float]:
    finite = [v for v in values if math.isfinite(v)]
    lo = min(finite) if lo is None and finite else (lo if lo is not None else 0.0)
    hi = max(finite) if hi is None and finite else (hi if hi is not None else 1.0)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


def sparkline(values: list[float], width: int, lo: float | None = None, hi: float | None = None) -> str:
    """One row of eighth-blocks; non-finite values are drawn as blanks."""
    pts = fit(values, width)
    if not pts:
        return ""
    lo, hi = _bounds(pts, lo, hi)
    out = []
    for v in pts:
        if not math.isfinite(v):
            out.append(" ")
            continue
        level = (min(max(v, lo), hi) - lo) / (hi - lo)
        out.append(BLOCKS[1 + round(level * 7)])
    return "".join(out)


def column_chart(values: list[float], width: int, height: int, lo: float | None = None,
                 hi: float | None = None, fmt: str = "{:.2f}") -> list[str]:
    """``height`` rows of columns (eighth-block resolution) with the top and bottom values as a
    y axis on the left. Rows are returned top first."""
    height = max(1, height)
    lo, hi = _bounds(values, lo, hi)
    labels = [fmt.format(hi), fmt.format(lo)]
    lw = max(len(s) for s in labels)
    pts = fit(values, max(1, width - lw - 1))
    rows = []
    for r in range(height):  # r = 0 is the top row
        floor_level = (height - 1 - r) * 8
        cells = []
        for v in pts:
            level = 0 if not math.isfinite(v) else round((min(max(v, lo), hi) - lo) / (hi - lo) * height * 8)
            level = max(level, 1)  # every point shows at least a sliver
            cells.append(BLOCKS[min(8, max(0, level - floor_level))])
        label = labels[0] if r == 0 else (labels[1] if r == height - 1 else "")
        rows.append(f"{label:>{lw}}│" + "".join(cells))
    return rows

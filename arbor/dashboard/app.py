"""Layout and loop of ``arbor dashboard``.

The loop is single-threaded on purpose (``Live(auto_refresh=False)``): the feed's cache is only
ever touched between renders, so no lock is needed, and a poll never overlaps a paint. It wakes
every 0.1 s to notice a terminal resize, and polls the store every ``interval`` seconds (≤ 1).
"""

from __future__ import annotations

import time

from rich.console import Console, ConsoleOptions, RenderResult
from rich.layout import Layout
from rich.live import Live

from . import panels
from .environment import env_panel
from .feed import CampaignFeed

WIDE = 110  # below this many columns the panels stack in one column
TICK_S = 0.1
IDLE_REPAINT_S = 5.0


class Dashboard:
    """A renderable that lays the panels out for whatever size it is drawn at."""

    def __init__(self, feed: CampaignFeed, interval: float = 1.0):
        self.feed = feed
        self.interval = interval

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        height = options.height or console.height
        yield self.layout(width, height)

    def layout(self, width: int, height: int) -> Layout:
        st = self.feed.state
        root = Layout()
        if st.waiting is not None or st.campaign is None:
            root.split_column(Layout(panels.header(st), size=1),
                              Layout(panels.Sized(lambda w, h: panels.waiting_panel(
                                  st, self.feed.source.describe(), w, h))),
                              Layout(panels.footer(st, self.interval), size=1))
            return root

        def region(build, **kw) -> Layout:
            return Layout(panels.Sized(lambda w, h: build(st, w, h)), **kw)

        head = Layout(panels.header(st), size=1)
        foot = Layout(panels.footer(st, self.interval), size=1)
        if width >= WIDE:
            top = Layout(size=9)
            top.split_row(region(panels.progress_panel, ratio=3), region(env_panel, ratio=2))
            mid = Layout(ratio=1)
            mid.split_row(region(panels.score_panel, ratio=2), region(panels.tree_panel, ratio=3))
            low = Layout(ratio=1)
            low.split_row(region(panels.verdicts_panel, ratio=3), region(panels.activity_panel, ratio=2))
            root.split_column(head, top, mid, low, foot)
        else:
            root.split_column(head, region(panels.progress_panel, size=9), region(env_panel, size=8),
                              region(panels.score_panel, size=7), region(panels.tree_panel, ratio=2),
                              region(panels.verdicts_panel, ratio=1), region(panels.activity_panel, ratio=1),
                              foot)
        return root


def render_frame(feed: CampaignFeed, console: Console, *, width: int | None = None,
                 height: int | None = None, poll: bool = True) -> None:
    """Poll once and print one frame (``--once``, screenshots, tests with a recording Console)."""
    if poll:
        feed.poll()
    w = width or console.width
    h = height or console.height
    console.print(Dashboard(feed).layout(w, h), width=w, height=h)


def run_live(feed: CampaignFeed, console: Console, interval: float = 1.0,
             max_seconds: float | None = None) -> None:
    """Repaint until Ctrl-C (or ``max_seconds``). Each poll reads only what changed."""
    interval = min(max(interval, 0.1), 1.0)
    dash = Dashboard(feed, interval)
    started = time.monotonic()
    with Live(dash, console=console, screen=True, auto_refresh=False, transient=False) as live:
        next_poll = last_paint = 0.0
        size = console.size
        while max_seconds is None or time.monotonic() - started < max_seconds:
            now = time.monotonic()
            if now >= next_poll:
                changed = feed.poll()
                next_poll = now + interval
                # painting a full screen costs far more than an idle poll: repaint on news, and
                # every few seconds for the "last write … ago" clocks
                if changed or now - last_paint >= IDLE_REPAINT_S:
                    live.refresh()
                    last_paint = now
            if console.size != size:  # resized: re-flow now, not at the next poll
                size = console.size
                live.refresh()
                last_paint = now
            time.sleep(TICK_S)

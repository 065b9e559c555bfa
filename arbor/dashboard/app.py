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
TALL = 44  # below this many rows (and WIDE columns) one page at a time: the compact layout
PAGE_S = 8.0  # the compact layout turns the page this often unless a key picked one
TICK_S = 0.1
IDLE_REPAINT_S = 5.0


class Dashboard:
    """A renderable that lays the panels out for whatever size it is drawn at."""

    def __init__(self, feed: CampaignFeed, interval: float = 1.0, page: str | None = None):
        self.feed = feed
        self.interval = interval
        self.page = page  # None: pages turn by themselves in the compact layout
        self.started = time.monotonic()

    def current_page(self) -> int:
        if self.page is not None:
            return PAGE_NAMES.index(self.page)
        return int((time.monotonic() - self.started) / PAGE_S) % len(PAGES)

    def key(self, ch: str) -> None:
        """1-6 picks a page, Tab / n / space the next one, 0 lets them turn again."""
        if ch in "123456" and int(ch) <= len(PAGES):
            self.page = PAGE_NAMES[int(ch) - 1]
        elif ch in ("\t", "n", " "):
            self.page = PAGE_NAMES[(self.current_page() + 1) % len(PAGES)]
        elif ch == "0":
            self.page, self.started = None, time.monotonic()

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
        if width < WIDE and height < TALL:
            i = self.current_page()
            name, build = PAGES[i]
            tabs = "  ".join(f"[{k + 1}] {n}" if k != i else f"[{k + 1}] {n.upper()}" for k, (n, _) in enumerate(PAGES))
            from rich.text import Text

            nav = Layout(Text(f" {tabs}  ·  Tab: next, 0: cycle", style="bold", no_wrap=True, overflow="ellipsis"),
                         size=1)
            root.split_column(head, region(panels.progress_panel, size=9), nav, region(build, ratio=1), foot)
        elif width >= WIDE:
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


PAGES = [("environment", env_panel), ("score", panels.score_panel), ("tree", panels.tree_panel),
         ("verdicts", panels.verdicts_full_panel), ("activity", panels.activity_panel)]
PAGE_NAMES = [n for n, _ in PAGES]


def render_frame(feed: CampaignFeed, console: Console, *, width: int | None = None,
                 height: int | None = None, poll: bool = True, page: str | None = None) -> None:
    """Poll once and print one frame (``--once``, screenshots, tests with a recording Console);
    ``page`` picks the compact layout's page (default the first)."""
    if poll:
        feed.poll()
    w = width or console.width
    h = height or console.height
    console.print(Dashboard(feed, page=page or PAGE_NAMES[0]).layout(w, h), width=w, height=h)


def run_live(feed: CampaignFeed, console: Console, interval: float = 1.0,
             max_seconds: float | None = None) -> None:
    """Repaint until Ctrl-C (or ``max_seconds``). Each poll reads only what changed."""
    interval = min(max(interval, 0.1), 1.0)
    from .keys import Keys

    dash = Dashboard(feed, interval)
    started = time.monotonic()
    with Live(dash, console=console, screen=True, auto_refresh=False, transient=False) as live, Keys() as keys:
        next_poll = last_paint = 0.0
        size = console.size
        page = dash.current_page()
        while max_seconds is None or time.monotonic() - started < max_seconds:
            now = time.monotonic()
            for ch in keys.read():
                dash.key(ch)
            if dash.current_page() != page:  # a key, or the compact layout's page turned
                page = dash.current_page()
                live.refresh()
                last_paint = now
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

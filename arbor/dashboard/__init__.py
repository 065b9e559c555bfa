"""``arbor dashboard``: a read-only live view of a running or finished campaign.

Modules, one job each:

* ``feed``    — poll the store incrementally (cursors + indexed queries) into a small cache;
* ``charts``  — text charts (sparklines, step charts) for a terminal;
* ``panels``  — the panels, pure functions of the cached state;
* ``app``     — the layout, the ``rich.live.Live`` loop and single-frame rendering.

The dashboard never writes, never migrates and never holds a read transaction between polls,
so a campaign being written by another process is neither slowed nor locked by it.
"""

from importlib import import_module

_EXPORTS = {"CampaignFeed": "feed", "Dashboard": "app", "render_frame": "app", "run_live": "app"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    # lazy: ``arbor report`` imports ``arbor.dashboard.feed`` and should not pay for the panels
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(name)

"""Where a campaign lives, resolved without touching it.

``arbor run`` creates and migrates the store; an observer must not. So the dashboard resolves
its argument to a URL (and, for SQLite, a file path it can watch for), and opens the store only
once it exists — read-only (see ``open_store(read_only=True)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import make_url

from arbor.search_tree.store import Store, StoreError, open_store


@dataclass(frozen=True)
class Source:
    url: str
    campaign: str | None  # None: the store's only campaign
    path: Path | None  # the SQLite file, when the store is one
    budget: dict | None = None  # from the YAML when given (the store has it too, once created)
    runs_dir: Path | None = None  # the campaign's arbor_runs/NAME directory, when given a YAML

    def describe(self) -> str:
        return str(self.path) if self.path else self.url

    def exists(self) -> bool:
        """False only for a SQLite file that is not there yet (servers are assumed to be up)."""
        return self.path is None or self.path.is_file()

    def open(self) -> Store:
        return open_store(self.url, read_only=True)


def _sqlite_path(url: str) -> Path | None:
    if not url.startswith("sqlite"):
        return None
    database = make_url(url).database
    if not database or database == ":memory:":
        raise StoreError(f"{url}: an in-memory store cannot be watched from another process — "
                         "use a database file")
    return Path(database).expanduser().resolve()


def resolve_source(target: str | None, campaign: str | None = None) -> Source:
    """A campaign YAML, a SQLAlchemy URL, a .db path, or None (./arbor.db) -> Source."""
    if target is None:
        target = "arbor.db"
    if target.endswith((".yaml", ".yml")):
        from arbor.spec import load_spec

        spec = load_spec(target)
        url = spec.store_url()
        return Source(url, campaign or spec.name, _sqlite_path(url), spec.budget.model_dump(),
                      spec.runs_dir().resolve())
    url = target if "://" in target else f"sqlite:///{Path(target).expanduser().resolve()}"
    return Source(url, campaign, _sqlite_path(url))


def evaluations_done(url: str, campaign: str) -> int:
    """Candidates already measured by earlier runs of a campaign (0 when there is no store yet):
    where a resumed run's progress bar starts."""
    source = Source(url, campaign, _sqlite_path(url))
    if not source.exists():
        return 0
    try:
        store = source.open()
    except StoreError:
        return 0
    try:
        if store.schema_revision() is None:
            return 0
        camp = store.get_campaign(campaign)
        return store.measurement_count(camp.id, distinct_candidates=True) if camp else 0
    except Exception:  # only the progress bar's start: `arbor run` itself reports a bad store
        return 0
    finally:
        store.close()

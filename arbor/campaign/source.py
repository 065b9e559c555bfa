"""Where a campaign lives: "campaign YAML, SQLAlchemy URL or .db path" → store + campaign.

``arbor run`` creates and migrates the store; nothing else may. Every read command (history,
tree, show, best, query, report, export) and the dashboard resolve their argument here and open
the store read-only (see ``open_store(read_only=True)``), so they are safe to point at a campaign
another terminal is running, and never leave an empty database behind on a typo.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from arbor.search_tree import open_store
from arbor.search_tree.records import CampaignRecord
from arbor.search_tree.store import Store, StoreError

DEFAULT_STORE = "arbor.db"  # what a read command opens when given no target


@dataclass(frozen=True)
class Source:
    url: str
    campaign: str | None  # None: the store's only campaign
    path: Path | None  # the SQLite file, when the store is one
    budget: dict | None = None  # from the YAML when given (the store has it too, once created)
    runs_dir: Path | None = None  # the campaign's arbor_runs/NAME directory, when given a YAML
    spec_file: str | None = None  # the campaign YAML, when given one

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
    from sqlalchemy import make_url  # here: resolving a path should not pay for SQLAlchemy elsewhere

    database = make_url(url).database
    if not database or database == ":memory:":
        raise StoreError(f"{url}: an in-memory store cannot be watched from another process — "
                         "use a database file")
    return Path(database).expanduser().resolve()


def resolve_source(target: str | None, campaign: str | None = None) -> Source:
    """A campaign YAML, a SQLAlchemy URL, a .db path, or None (./arbor.db) -> Source."""
    if target is None:
        target = DEFAULT_STORE
    if target.endswith((".yaml", ".yml")):
        from arbor.spec import load_spec

        spec = load_spec(target)
        url = spec.store_url()
        return Source(url, campaign or spec.name, _sqlite_path(url), spec.budget.model_dump(),
                      spec.runs_dir().resolve(), spec_file=target)
    url = target if "://" in target else f"sqlite:///{Path(target).expanduser().resolve()}"
    return Source(url, campaign, _sqlite_path(url))


def open_source(target: str | None, campaign: str | None = None) -> tuple[Source, Store]:
    """Resolve and open read-only; one-line StoreError when there is nothing to read."""
    source = resolve_source(target, campaign)
    if not source.exists():
        if source.spec_file:
            raise StoreError(f"no campaign named '{source.campaign}' yet: its store {source.describe()} does not "
                             f"exist — run it first (`arbor run {source.spec_file}`)")
        raise StoreError(f"store not found: {source.describe()} — run the campaign first "
                         "(`arbor run CAMPAIGN.yaml`) or pass the campaign YAML / arbor.db beside it")
    store = source.open()
    if store.schema_revision() is None:
        store.close()
        raise StoreError(f"{source.describe()} is not an Arbor store yet — has the campaign started?")
    return source, store


def open_campaign(target: str | None, campaign: str | None = None) -> tuple[Source, Store, CampaignRecord]:
    """-> (source, read-only store, campaign record); the caller closes the store."""
    source, store = open_source(target, campaign)
    try:
        return source, store, resolve_campaign(store, source.campaign)
    except BaseException:
        store.close()
        raise


def resolve_campaign(store: Store, name: str | None) -> CampaignRecord:
    camps = store.list_campaigns()
    if name:
        camp = store.get_campaign(name)
        if camp is None:
            known = ", ".join(c.name for c in camps) or "none"
            raise StoreError(f"no campaign named '{name}' in this store (campaigns: {known})")
        return camp
    if not camps:
        raise StoreError("this store has no campaigns yet — start one with `arbor run CAMPAIGN.yaml`")
    if len(camps) > 1:
        raise StoreError("this store holds several campaigns ("
                         + ", ".join(c.name for c in camps) + ") — pick one with --campaign NAME")
    return camps[0]


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

"""Deleting a whole campaign: the one operation allowed to remove rows of the event log.

The append-only trigger protects the log from the loop and from ad-hoc SQL; ``arbor campaigns
rm`` is an explicit user decision about a whole campaign, so it lifts the trigger for its own
transaction only (SQLite DDL is transactional; PostgreSQL's ``DISABLE TRIGGER`` is too) and
puts it back before committing. Artifacts are content-addressed and may be shared by other
campaigns: the ones no node refers to any more are removed too.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Engine

SQLITE_TRIGGER = ("CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events "
                  "BEGIN SELECT RAISE(ABORT, 'events are append-only'); END")

_DELETES = (
    "DELETE FROM events WHERE campaign_id = :cid",
    "DELETE FROM leases WHERE campaign_id = :cid",
    # a run killed without its clean stop (SIGKILL, power loss) leaves its campaign lease behind
    "DELETE FROM campaign_leases WHERE campaign_id = :cid",
    "DELETE FROM verdicts WHERE node_id IN (SELECT id FROM nodes WHERE campaign_id = :cid)",
    "DELETE FROM measurements WHERE node_id IN (SELECT id FROM nodes WHERE campaign_id = :cid)",
    "UPDATE campaigns SET root_node_id = NULL WHERE id = :cid",
)


def delete_campaign(engine: Engine, campaign_id: int) -> int:
    """Remove the campaign and everything recorded under it; returns the number of nodes removed."""
    dialect = engine.dialect.name
    with engine.begin() as conn:
        if dialect == "sqlite":
            conn.exec_driver_sql("DROP TRIGGER IF EXISTS events_append_only_delete")
        elif dialect == "postgresql":
            conn.exec_driver_sql("ALTER TABLE events DISABLE TRIGGER events_append_only")
        for sql in _DELETES:
            conn.execute(text(sql), {"cid": campaign_id})
        # children before parents: the parent foreign key is checked row by row on some engines
        n = 0
        while True:
            gone = conn.execute(text(
                "DELETE FROM nodes WHERE campaign_id = :cid AND id NOT IN "
                "(SELECT parent_id FROM nodes WHERE parent_id IS NOT NULL)"), {"cid": campaign_id}).rowcount
            n += gone
            if not gone:
                break
        conn.execute(text("DELETE FROM campaigns WHERE id = :cid"), {"cid": campaign_id})
        conn.execute(text("DELETE FROM artifacts WHERE sha256 NOT IN (SELECT artifact_sha FROM nodes) "
                          "AND sha256 NOT IN (SELECT artifact_sha FROM measurements)"))
        if dialect == "sqlite":
            conn.exec_driver_sql(SQLITE_TRIGGER)
        elif dialect == "postgresql":
            conn.exec_driver_sql("ALTER TABLE events ENABLE TRIGGER events_append_only")
    return n

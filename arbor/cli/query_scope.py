"""``arbor query --campaign NAME``: the same SQL, seeing one campaign's rows only.

Each table and view is shadowed by a common table expression of the same name that keeps the
campaign's rows, so any query a user wrote against the whole store runs unchanged. The real
tables are reached through their schema (``main.`` in SQLite, ``public.`` in PostgreSQL)."""

from __future__ import annotations

import re

_SCOPED = {
    "campaigns": "id = {cid}",
    "nodes": "campaign_id = {cid}",
    "events": "campaign_id = {cid}",
    "leases": "campaign_id = {cid}",
    "measurements": "node_id IN (SELECT id FROM {schema}.nodes WHERE campaign_id = {cid})",
    "verdicts": "node_id IN (SELECT id FROM {schema}.nodes WHERE campaign_id = {cid})",
    "v_nodes": "campaign_id = {cid}",
    "v_measurements": "campaign_id = {cid}",
    "v_verdicts": "campaign_id = {cid}",
}
_WITH = re.compile(r"^\s*with(\s+recursive)?\b", re.IGNORECASE)


def scoped(sql: str, campaign_id: int, sqlite: bool = True) -> str:
    schema = "main" if sqlite else "public"
    ctes = ", ".join(f"{t} AS (SELECT * FROM {schema}.{t} WHERE {cond.format(cid=int(campaign_id), schema=schema)})"
                     for t, cond in _SCOPED.items())
    m = _WITH.match(sql)
    if m:
        return f"WITH{m.group(1) or ''} {ctes}, {sql[m.end():].lstrip()}"
    return f"WITH {ctes} {sql}"

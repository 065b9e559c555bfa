"""``arbor export``: a campaign's nodes, measurements and verdicts as JSON or CSV.

JSON is one document (``{"campaign", "nodes", "measurements", "verdicts"}``) with every column;
CSV is one file per table in a directory, nested values (samples, gates, fingerprints) encoded
as JSON in their cell, so nothing is lost and a spreadsheet still opens it.
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from arbor.search_tree.records import CampaignRecord, MeasurementRecord, NodeRecord, VerdictRecord
from arbor.search_tree.store import Store

TABLES = {"nodes": NodeRecord, "measurements": MeasurementRecord, "verdicts": VerdictRecord}
BIG = 10**9


def _plain(v: Any) -> Any:
    if isinstance(v, datetime):
        return v.isoformat()
    return v


def _row(rec) -> dict:
    return {k: _plain(v) for k, v in asdict(rec).items()}


def collect(store: Store, campaign: CampaignRecord) -> dict[str, Any]:
    return {
        "campaign": _row(campaign),
        "nodes": [_row(n) for n in store.nodes(campaign.id)],
        "measurements": [_row(m) for m in store.measurements_after(campaign.id, 0, limit=BIG)],
        "verdicts": [_row(v) for v in store.verdicts_after(campaign.id, 0, limit=BIG)],
    }


def to_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, default=str) + "\n"


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, (list, dict)):
        return json.dumps(v, default=str)
    return str(v)


def write_csv(data: dict[str, Any], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for table, cls in TABLES.items():
        cols = [f.name for f in fields(cls)]
        path = out_dir / f"{table}.csv"
        with path.open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(cols)
            for row in data[table]:
                w.writerow([_cell(row.get(c)) for c in cols])
        paths.append(path)
    return paths

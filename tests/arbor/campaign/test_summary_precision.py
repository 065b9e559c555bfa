"""The run summary (``arbor run --json``) names the precision mode its numbers were measured in,
also for campaigns stored before precision modes existed."""

from __future__ import annotations

from arbor.campaign.run import summarize
from arbor.search_tree import open_store


def test_the_summary_names_the_precision_mode():
    store = open_store("sqlite://")
    try:
        store.get_or_create_campaign("bf16", "kernel", {"target": {"kind": "kernel", "problem": "p.py",
                                                                   "precision": "bf16"}})
        store.get_or_create_campaign("old", "kernel", {"target": {"kind": "kernel", "problem": "p.py",
                                                                  "dtype": "float16"}})
        store.get_or_create_campaign("srv", "serving", {"target": {"kind": "serving"}})
        assert summarize(store, "bf16").to_dict()["precision"] == "bf16"
        assert summarize(store, "old").precision == "fp16"
        assert summarize(store, "srv").precision is None
    finally:
        store.close()

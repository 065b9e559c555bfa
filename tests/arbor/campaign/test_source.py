"""``open_campaign``: the one way every read command and the dashboard find a campaign."""

from __future__ import annotations

import pytest

from arbor.campaign.source import open_campaign, open_source, resolve_source
from arbor.search_tree import open_store
from arbor.search_tree.store import StoreError


def _campaign_yaml(tmp_path, name="c"):
    p = tmp_path / f"{name}.yaml"
    p.write_text(f"name: {name}\ntarget: {{problem: p.py}}\n")
    return p


def test_a_campaign_file_whose_store_is_missing_is_one_line_and_creates_nothing(tmp_path):
    yaml = _campaign_yaml(tmp_path)
    with pytest.raises(StoreError, match="no campaign named 'c' yet"):
        open_campaign(str(yaml))
    assert not (tmp_path / "arbor.db").exists()
    with pytest.raises(StoreError, match="store not found"):
        open_source(str(tmp_path / "nope.db"))


def test_yaml_db_path_and_url_open_the_same_campaign_read_only(tmp_path):
    yaml = _campaign_yaml(tmp_path)
    url = resolve_source(str(yaml)).url
    store = open_store(url)
    store.get_or_create_campaign("c", "kernel", {})
    store.get_or_create_campaign("other", "kernel", {})
    store.close()
    for target, name in ((str(yaml), None), (str(tmp_path / "arbor.db"), "c"), (url, "c")):
        _, ro, camp = open_campaign(target, name)
        try:
            assert camp.name == "c"
            with pytest.raises(Exception):
                ro.get_or_create_campaign("new", "kernel", {})
        finally:
            ro.close()
    with pytest.raises(StoreError, match="pick one with --campaign"):
        open_campaign(str(tmp_path / "arbor.db"))

"""The user-level knowledge store: records in, dedupe, revocation, export/import, default path."""

from __future__ import annotations

import json

import pytest

from arbor.search_tree.knowledge import KnowledgeError, KnowledgeRecord, KnowledgeStore, default_url


def rec(node: int, move: str = "m", sha: str | None = None, **kw) -> KnowledgeRecord:
    base = dict(campaign="c", node_id=node, artifact_sha=sha or f"sha{node}",
                hardware={"class": "cpu/intel-cpu/1-2"}, software={"torch": "2.4"},
                signature={"ops": {"gemm": 1.0}}, move_id=move, family="f", agent="a",
                diagnosis="improved", decision="accept", speedup=1.5, integrity_ok=True)
    base.update(kw)
    return KnowledgeRecord(**base)


def test_default_url_follows_xdg_data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_url() == f"sqlite:///{tmp_path / 'data' / 'arbor' / 'knowledge.db'}"
    ks = KnowledgeStore()
    assert (tmp_path / "data" / "arbor" / "knowledge.db").exists()
    ks.close()


def test_records_are_added_once_revoked_and_filtered(tmp_path):
    ks = KnowledgeStore(f"sqlite:///{tmp_path}/k.db")
    assert ks.add([rec(1), rec(2, sha="bad")]) == 2
    assert ks.add([rec(1)]) == 0  # same campaign and node: already known
    assert ks.revoke("bad", "hostile: forged timer") == 1
    recs = {r.node_id: r for r in ks.records()}
    assert recs[2].revoked == "hostile: forged timer" and recs[1].revoked is None
    assert [r.node_id for r in ks.records(include_revoked=False)] == [1]
    assert ks.records(hardware_class="cuda/nvidia-hopper/33+") == []
    ks.close()


def test_export_import_round_trip_carries_revocations(tmp_path):
    a = KnowledgeStore(f"sqlite:///{tmp_path}/a.db")
    a.add([rec(1), rec(2, sha="bad")])
    a.revoke("bad", "incorrect on re-check")
    assert a.export(tmp_path / "k.jsonl") == 2
    b = KnowledgeStore(f"sqlite:///{tmp_path}/b.db")
    assert b.import_file(tmp_path / "k.jsonl") == 2
    assert {r.node_id: r.revoked for r in b.records()} == {1: None, 2: "incorrect on re-check"}
    (tmp_path / "bad.jsonl").write_text(json.dumps({"format": "other"}) + "\n")
    with pytest.raises(KnowledgeError, match=r"bad.jsonl:1: not a knowledge record"):
        b.import_file(tmp_path / "bad.jsonl")
    with pytest.raises(KnowledgeError, match="cannot read"):
        b.import_file(tmp_path / "missing.jsonl")
    a.close()
    b.close()


def test_the_verified_final_is_marked_on_its_campaigns_records_and_exported(tmp_path):
    a = KnowledgeStore(f"sqlite:///{tmp_path}/a.db")
    a.add([rec(1), rec(2, sha="best")])
    assert a.mark_final("c", "best", 1.7) == 1 and a.mark_final("other", "best", 9.0) == 0
    assert {r.node_id: r.extra.get("verified_final") for r in a.records()} == {1: None, 2: 1.7}
    a.export(tmp_path / "k.jsonl")
    b = KnowledgeStore(f"sqlite:///{tmp_path}/b.db")
    b.import_file(tmp_path / "k.jsonl")
    assert {r.node_id: r.extra.get("verified_final") for r in b.records()} == {1: None, 2: 1.7}
    a.close()
    b.close()

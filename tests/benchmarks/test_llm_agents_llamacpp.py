"""The LLM-agents benchmark reads every role's calls back from the campaign's store: the valid
share counts first replies and repaired ones, fallbacks are counted per role, and the loop's or
the profiler's own events are not an LLM role."""

from __future__ import annotations

from benchmarks.llm_agents_llamacpp import _calls
from arbor.search_tree import open_store


def test_valid_share_per_role_from_the_stored_calls(tmp_path):
    db = tmp_path / "c.db"
    store = open_store(f"sqlite:///{db}")
    camp = store.get_or_create_campaign("c", "kernel", {})
    store.add_node(camp.id, store.put_artifact("root", "module"), "baseline")
    for agent, status, phase in [("orchestrator-llm", "ok", "first"), ("orchestrator-llm", "invalid", "first"),
                                 ("orchestrator-llm", "ok", "repair"), ("kernel-llm", "retry", "first"),
                                 ("kernel-llm", "invalid", "first"), ("kernel-llm", "invalid", "repair")]:
        store.append_event(camp.id, "llm_call", {"status": status, "phase": phase}, agent=agent)
    store.append_event(camp.id, "llm_no_proposal", {"parent": 1}, agent="kernel-llm")
    store.append_event(camp.id, "select", {"parent": 1}, agent="loop")
    out = _calls(db)
    roles = out["roles"]
    assert set(roles) == {"orchestrator-llm", "kernel-llm"}
    assert roles["orchestrator-llm"]["replies"] == 3 and abs(roles["orchestrator-llm"]["valid_share"] - 2 / 3) < 1e-9
    assert roles["orchestrator-llm"]["repair_sent"] == 1
    k = roles["kernel-llm"]
    assert k["replies"] == 2 and k["valid_share"] == 0.0 and k["fallbacks"] == 1 and k["calls_retry"] == 1
    assert out["proposals"] == 0

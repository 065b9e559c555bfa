"""A serving campaign end to end with the LLM serving Specialist against the scripted OpenAI
server: the model reads the parent's measured symptoms and the knob table, its knob change
becomes the candidate's artifact (the target's canonical JSON), and a change outside the knob
table is sent back for repair instead of reaching the sandbox."""

from __future__ import annotations

import json

import pytest
import yaml

from arbor.agents.llm.audit import unpack
from arbor.agents.transforms.knobs import canonical_config, parse_config
from arbor.campaign.run import run_campaign
from arbor.search_tree import open_store
from arbor.spec import load_spec

from .scripted_server import ScriptedServer, ok

pytestmark = pytest.mark.slow


def test_llm_serving_specialist_campaign(campaign_dir):
    prompts = []

    def model(req):
        assert req.schema_name == "ServingProposals"
        prompts.append(req.text)
        return ok({"candidates": [{"hypothesis": "requests queue behind one running sequence: batch up to 8",
                                   "changes": [{"knob": "max_batch_size", "value": 8}], "predicted_gain": 2.0}]})

    spec = yaml.safe_load((campaign_dir / "serving_cpu.yaml").read_text())
    spec["name"] = "serving-llm"
    load = spec["target"]["load"]
    load.update({"concurrency": [4], "num_prompts": 8, "warmup_requests": 1, "repeats": 2})
    load["synthetic"]["output_len"] = {"mean": 4}
    spec["budget"].update({"max_evaluations": 1})
    spec["critic"].update({"max_cv": 10, "confirm_new_best": False, "max_remeasures": 0})
    with ScriptedServer(model) as server:
        # the first reply breaks the knob table (and is repaired), the second is the scripted model's
        server.push(ok({"candidates": [{"hypothesis": "use a batch far beyond the table's limit",
                                        "changes": [{"knob": "max_batch_size", "value": 4096}],
                                        "predicted_gain": 3.0}]}))
        spec["agents"].update({"base_url": server.url, "model": "scripted-model", "retry_backoff_s": 0.02,
                               "specialist": {"backend": "openai"}})
        path = campaign_dir / "serving-llm.yaml"
        path.write_text(yaml.safe_dump(spec))
        summary = run_campaign(load_spec(path), lambda kind, data: None)
        assert len(server.chat_requests()) == 2
        repair = server.chat_requests()[1].messages[-1]["content"]
    assert "max_batch_size" in repair and "outside" in repair
    assert summary.stop_reason.startswith("budget: 1 evaluations"), summary.stop_reason
    # the model saw the knob table and the baseline's measured symptoms
    assert "max_batch_size: int in [1.0, 64.0]" in prompts[0] and '"queued"' in prompts[0]

    store = open_store(f"sqlite:///{campaign_dir / 'arbor.db'}")
    camp = store.list_campaigns()[0]
    root = store.get_node(camp.root_node_id)
    (child,) = [n for n in store.nodes(camp.id) if n.parent_id is not None]
    expected = {**parse_config(store.get_artifact(root.artifact_sha)), "max_batch_size": 8}
    assert store.get_artifact(child.artifact_sha) == canonical_config(expected)
    assert child.specialist == "serving-llm" and child.predicted_gain == 2.0 and child.state != "proposed"
    # it reached the sandbox and was measured; as the accepted best it is then verified (median of 3)
    wanted = 3 if child.state == "accepted" else 1
    assert len(store.measurements(child.id)) == wanted, child.state
    evs = store.events(camp.id, limit=10_000)
    (prop,) = [e for e in evs if e.kind == "propose" and e.node_id == child.id]
    assert prop.payload["changes"] == {"max_batch_size": 8}
    reply = next(e for e in evs if e.id == prop.payload["llm_event"])
    assert json.loads(unpack(reply.payload["reply_z"]))["candidates"][0]["changes"][0]["value"] == 8
    statuses = [e.payload["status"] for e in evs if e.kind == "llm_call"]
    assert statuses == ["invalid", "ok"]
    store.close()

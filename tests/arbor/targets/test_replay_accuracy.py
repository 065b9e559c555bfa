"""A replayed serving config that changes numerics is held to the accuracy gate as a live one is:
accepted only if the point was recorded with the gate passing, never on speed alone."""

from __future__ import annotations

from pathlib import Path

from arbor.agents.transforms.knobs import canonical_config
from arbor.campaign.run import run_campaign
from arbor.search_tree import open_store
from arbor.spec import parse_spec
from arbor.targets.landscape import FORMAT, Landscape
from arbor.targets import make_adapter

CRITIC = {"max_cv": 0.5, "min_speedup": 1.02, "max_remeasures": 1, "confirm_new_best": True}


def _run(speedup: float, n: int = 12) -> dict:
    return {"b": [1.0 * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)],
            "c": [(1.0 / speedup) * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)]}


def _landscape(tmp_path: Path, fp8_accuracy: str | None) -> Path:
    ls = Landscape.model_validate({
        "format": FORMAT, "name": "serving-kv", "kind": "serving",
        "knobs": [{"name": "kv_cache_dtype", "values": ["auto", "fp8"], "default": "auto"},
                  {"name": "max_num_seqs", "values": [64, 128], "default": 64}],
        "points": [
            {"knobs": {"kv_cache_dtype": "auto", "max_num_seqs": 64}, "runs": [_run(1.0)] * 3},
            {"knobs": {"kv_cache_dtype": "auto", "max_num_seqs": 128}, "runs": [_run(1.3)] * 3},
            {"knobs": {"kv_cache_dtype": "fp8", "max_num_seqs": 64}, "runs": [_run(2.0)] * 3,
             "accuracy": fp8_accuracy},
            {"knobs": {"kv_cache_dtype": "fp8", "max_num_seqs": 128}, "runs": [_run(2.5)] * 3,
             "accuracy": fp8_accuracy},
        ],
        "campaign": {"critic": CRITIC, "measurement": {"seeds": [0]}},
    })
    path = tmp_path / f"kv-{fp8_accuracy}.json"
    ls.dump(path)
    return path


def _spec(tmp_path: Path, landscape: Path):
    return parse_spec({"name": landscape.stem, "target": {"kind": "replay", "landscape": str(landscape),
                                                         "moves": "any"},
                       "budget": {"max_evaluations": 10}, "critic": {**CRITIC, "final_measurements": 0},
                       "store": {"url": f"sqlite:///{tmp_path / (landscape.stem + '.db')}"}},
                      "<test>", tmp_path)


def test_numerics_change_without_a_recorded_accuracy_pass_is_incorrect(tmp_path):
    adapter = make_adapter(_spec(tmp_path, _landscape(tmp_path, None)))
    fp8 = adapter.replay_result(canonical_config({"kv_cache_dtype": "fp8", "max_num_seqs": 64}))
    assert fp8["status"] == "error" and fp8["error_class"] == "incorrect"
    assert "kv_cache_dtype" in fp8["error_text"] and "accuracy unchecked" in fp8["error_text"]
    seqs = adapter.replay_result(canonical_config({"kv_cache_dtype": "auto", "max_num_seqs": 128}))
    assert seqs["status"] == "ok"  # a knob that leaves the tokens alone needs no accuracy record


def test_a_replayed_campaign_never_accepts_an_unchecked_numerics_change(tmp_path):
    for accuracy, fp8_allowed in ((None, False), ("failed", False), ("passed", True)):
        spec = _spec(tmp_path, _landscape(tmp_path, accuracy))
        s = run_campaign(spec, lambda *a: None)
        store = open_store(spec.store_url())
        try:
            nodes = store.nodes(store.get_campaign(spec.name).id)
            accepted = [store.get_artifact(n.artifact_sha) for n in nodes if n.state == "accepted"]
            fp8_nodes = [n for n in nodes if '"fp8"' in store.get_artifact(n.artifact_sha)]
        finally:
            store.close()
        assert fp8_nodes, "the campaign never tried the fp8 KV cache"
        assert any('"fp8"' in a for a in accepted) == fp8_allowed, (accuracy, accepted)
        if not fp8_allowed:
            assert all(n.diagnosis == "incorrect" for n in fp8_nodes)
            assert s.speedup < 1.5

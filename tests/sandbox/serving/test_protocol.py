"""The serving protocol end to end against scripted servers: interleaving, failures, the
accuracy probe, Ctrl-C — and never a server left behind."""

import pytest

from arbor.sandbox.serving import protocol
from arbor.sandbox.runners.proctree import pid_alive
from arbor.sandbox.serving.lifecycle import ServerConfig
from arbor.sandbox.serving.loadgen import Level, LoadConfig
from arbor.sandbox.serving.metrics import Slo
from arbor.sandbox.serving.protocol import AccuracyProbe, ServingRequest, measure_serving
from arbor.sandbox.serving.workload import LengthDist, synthetic_requests

from .conftest import scripted_argv


def request(tmp_path, base=None, cand=None, **kw):
    def cfg(opts, label):
        return ServerConfig(argv=scripted_argv(**(opts or {})), lease_dir=tmp_path / "leases", label=label,
                            startup_timeout_s=20, stop_grace_s=0.5)

    args = dict(baseline=cfg({"ttft_ms": 40, "itl_ms": 5, **(base or {})}, "baseline"),
                candidate=cfg({"ttft_ms": 40, "itl_ms": 5, **(cand or {})}, "candidate"),
                load=LoadConfig(model="m", num_prompts=4, warmup_requests=1, metrics_path="/metrics",
                                slo=Slo(e2e_ms=1000)),
                requests=synthetic_requests(8, LengthDist(8), LengthDist(3)),
                levels=[Level(concurrency=1), Level(concurrency=2)], repeats=2, lease_dir=tmp_path / "leases",
                timeout_s=60)
    args.update(kw)
    return ServingRequest(**args)


def no_leases(tmp_path):
    return not list((tmp_path / "leases").glob("*.json"))


def test_concurrent_rounds_interleave_per_level_and_compare_the_servers(tmp_path):
    r = measure_serving(request(tmp_path, cand={"ttft_ms": 5}))
    assert r["status"] == "ok", r["error_text"]
    raw = r["stats"]["serving"]
    assert raw["order"] == ["0:baseline:0", "0:candidate:0", "0:candidate:1", "0:baseline:1",
                            "1:candidate:0", "1:baseline:0", "1:baseline:1", "1:candidate:1"]
    assert len(raw["rounds"]) == 2 and all(len(rd[s]) == 2 for rd in raw["rounds"] for s in ("baseline", "candidate"))
    assert raw["startup_s"]["baseline"] and raw["startup_s"]["candidate"]  # one start each
    for rd in raw["rounds"]:
        assert rd["candidate"][0]["ttft_ms"]["p50"] < rd["baseline"][0]["ttft_ms"]["p50"]
    sym = raw["symptoms"]["candidate"]
    assert sym["queued"] == 3 and sym["concurrency"] == 2 and "ttft_p99_ms" in sym and "ttft_share" in sym
    assert no_leases(tmp_path)


def test_sequential_mode_restarts_only_between_sides(tmp_path):
    r = measure_serving(request(tmp_path, server_mode="sequential"))
    assert r["status"] == "ok", r["error_text"]
    raw = r["stats"]["serving"]
    # A | B B | A: the baseline starts twice, the candidate once
    assert len(raw["startup_s"]["baseline"]) == 2 and len(raw["startup_s"]["candidate"]) == 1
    assert raw["order"] == ["0:baseline:0,1", "0:candidate:0,1", "1:candidate:0,1", "1:baseline:0,1"]
    assert no_leases(tmp_path)


def test_candidate_start_up_crash_is_data_not_an_exception(tmp_path):
    req = request(tmp_path)
    req.candidate.argv = scripted_argv(ttft_ms=5) + ["--no-such-flag"]
    r = measure_serving(req)
    assert (r["status"], r["error_class"]) == ("failed", "startup_failed")
    assert "candidate server exited" in r["error_text"] and "--no-such-flag" in r["error_text"]
    assert no_leases(tmp_path)


def test_accuracy_probe_records_both_servers(tmp_path):
    probe = AccuracyProbe(synthetic_requests(3, LengthDist(5), LengthDist(4), seed=9))
    r = measure_serving(request(tmp_path, cand={"diverge_at": 1, "logprob_shift": 0.2}, accuracy=probe, repeats=2))
    acc = r["stats"]["serving"]["accuracy"]
    assert len(acc["baseline"]) == 3 and all(a["ok"] for a in acc["baseline"] + acc["candidate"])
    assert acc["baseline"][0]["tokens"][1] == " t1" and acc["candidate"][0]["tokens"][1] == " other"
    assert acc["candidate"][0]["logprobs"][0] == pytest.approx(acc["baseline"][0]["logprobs"][0] + 0.2)


def test_ctrl_c_stops_both_servers_and_propagates(tmp_path, monkeypatch):
    seen = []

    async def interrupted(client, base_url, *a, **kw):
        seen.extend(s.pid for s in started)
        raise KeyboardInterrupt

    started = []
    real_start = protocol.start_servers

    def spy(cfgs, registry):
        out = real_start(cfgs, registry)
        started.extend(out)
        return out

    monkeypatch.setattr(protocol, "run_level", interrupted)
    monkeypatch.setattr(protocol, "start_servers", spy)
    with pytest.raises(KeyboardInterrupt):
        measure_serving(request(tmp_path))
    assert len(seen) == 2 and not any(pid_alive(p) for p in seen)
    assert no_leases(tmp_path)


def test_the_measurement_time_limit_is_a_timeout(tmp_path):
    r = measure_serving(request(tmp_path, base={"ttft_ms": 3000}, timeout_s=3))
    assert (r["status"], r["error_class"]) == ("failed", "timeout")
    assert no_leases(tmp_path)

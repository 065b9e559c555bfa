"""The load generator against a real local streaming server whose timings are scripted.

Sleeps only ever make things later, so every timing is checked as [expected, expected × ratio]
with generous ratios (the CI box is shared), never as an absolute window around the value.
"""

import asyncio

import numpy as np
import pytest

from arbor.sandbox.serving.loadgen import Level, LoadConfig, make_client, run_level
from arbor.sandbox.serving.metrics import Slo, parse_prometheus, percentile, server_signals
from arbor.sandbox.serving.workload import LengthDist, RequestSpec, synthetic_requests

SLACK = 2.5  # a loaded 2-core box may stretch a sleep, never shrink it; timings are chosen so that
# a wrong formula (TPOT without subtracting TTFT, a role event taken as a token) misses by more


def run(server, level, requests, **cfg):
    lc = LoadConfig(model="m", **cfg)

    async def go():
        async with make_client(16) as client:
            return await run_level(client, server.base_url, lc, requests, level)

    return asyncio.run(go())


def within(value, expected, slack=SLACK):
    assert expected * 0.97 <= value <= expected * slack, (value, expected)


def reqs(n, max_tokens, text="hello there", api="completions"):
    return [RequestSpec(text if api == "completions" else None,
                        [{"role": "user", "content": text}] if api == "chat" else None, max_tokens, 2)
            for _ in range(n)]


def test_every_metric_matches_the_scripted_timings(scripted):
    ttft, itl, n = 300.0, 20.0, 5
    with scripted(ttft_ms=ttft, itl_ms=itl) as s:
        r = run(s, Level(concurrency=1), reqs(4, n), num_prompts=4, metrics_path="/metrics",
                slo=Slo(ttft_ms=1000, e2e_ms=2000))
    e2e = ttft + (n - 1) * itl
    assert r["completed"] == 4 and r["failed"] == 0 and r["usage_reported"]
    assert r["output_tokens"] == 4 * n and r["input_tokens"] == 4 * 7  # from the streamed usage
    for q in ("p50", "p90", "p99"):
        within(r["ttft_ms"][q], ttft)
        within(r["e2e_ms"][q], e2e)
        within(r["tpot_ms"][q], itl)
        within(r["itl_ms"][q], itl)
    assert r["itl_ms"]["n"] == 4 * (n - 1)
    # one request at a time: throughput is the inverse of the end-to-end latency
    assert r["duration_s"] >= 4 * e2e / 1e3
    assert r["req_s"] == pytest.approx(4 / r["duration_s"])
    within(1 / r["req_s"], e2e / 1e3)
    assert r["out_tok_s"] == pytest.approx(r["req_s"] * n)
    assert r["total_tok_s"] == pytest.approx(r["req_s"] * (n + 7))
    assert r["goodput_req_s"] == pytest.approx(r["req_s"]) and r["slo_attainment"] == 1.0
    assert r["out_len_ratio"] == 1.0
    assert r["server"]["queued"] == 3 and r["server"]["kv_usage"] == 0.5 and r["server"]["running"] == 2


def test_usage_beats_event_count_and_tpot_uses_tokens(scripted):
    # 9 tokens in events of 3: ITLs are per event, TPOT per token (events would give 4x more)
    with scripted(ttft_ms=80, itl_ms=60, tokens_per_event=3) as s:
        r = run(s, Level(concurrency=2), reqs(2, 9), num_prompts=2)
    assert r["output_tokens"] == 18
    assert r["itl_ms"]["n"] == 2 * 2
    within(r["itl_ms"]["p50"], 60)
    within(r["tpot_ms"]["p50"], 2 * 60 / 8)  # (E2E − TTFT) / (tokens − 1)
    with scripted(ttft_ms=10, itl_ms=10, tokens_per_event=2, usage="false") as s:
        r = run(s, Level(concurrency=1), reqs(1, 6), num_prompts=1)
    assert r["output_tokens"] == 3 and not r["usage_reported"]  # no usage: events are all we know


def test_queueing_concurrency_goodput_and_failures(scripted):
    e2e = 100 + 3 * 20
    with scripted(ttft_ms=100, itl_ms=20, slots=1) as s:
        r = run(s, Level(concurrency=3), reqs(6, 4), num_prompts=6, slo=Slo(ttft_ms=150))
        # three in flight, one served at a time: later requests queue behind the first
        assert r["e2e_ms"]["p99"] >= 2.9 * e2e and r["e2e_ms"]["p50"] >= 1.9 * e2e
        within(1 / r["req_s"], e2e / 1e3)
        assert 0 < r["goodput_req_s"] < r["req_s"]  # only un-queued requests meet a 150 ms TTFT
        bad = reqs(2, 4) + reqs(2, 4, text="please FAIL")
        r = run(s, Level(concurrency=2), bad, num_prompts=4)
    assert r["completed"] == 2 and r["failed"] == 2
    assert any("HTTP 500" in k for k in r["errors"])


def test_chat_endpoint_ignores_role_only_events(scripted):
    with scripted(ttft_ms=90, itl_ms=15) as s:
        r = run(s, Level(concurrency=1), reqs(2, 3, api="chat"), num_prompts=2, api="chat")
    assert r["completed"] == 2 and r["output_tokens"] == 6
    within(r["ttft_ms"]["p50"], 90)  # the role-only first event is not the first token


def test_request_rate_and_duration_modes(scripted):
    with scripted(ttft_ms=20, itl_ms=5) as s:
        r = run(s, Level(rate=40.0), reqs(12, 2), num_prompts=12)
        assert r["completed"] == 12
        assert r["duration_s"] >= 0.1  # Poisson arrivals at 40/s spread 12 requests out
        d = run(s, Level(concurrency=2), reqs(5, 2), num_prompts=None, duration_s=0.5)
    assert d["completed"] >= 5 and d["duration_s"] >= 0.5  # cycles the list until the deadline


def test_unreachable_server_is_counted_as_failures():
    class Dead:
        base_url = "http://127.0.0.1:9"  # discard port: connection refused

    r = run(Dead(), Level(concurrency=2), reqs(3, 2), num_prompts=3, request_timeout_s=2)
    assert r["failed"] == 3 and r["completed"] == 0 and r["req_s"] == 0


def test_percentiles_and_prometheus_parsing():
    xs = list(np.random.default_rng(0).random(101))
    for q in (50, 90, 99):
        assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))
    text = ('# HELP x\nvllm:num_requests_waiting{engine="0"} 2\nvllm:num_requests_waiting{engine="1"} 3\n'
            'sglang:token_usage 0.25\nbad line here\n')
    assert server_signals(parse_prometheus(text)) == {"queued": 5.0, "kv_usage": 0.25}


def test_synthetic_prompts_are_seeded_and_sized():
    a = synthetic_requests(5, LengthDist(20, 0.5), LengthDist(8), seed=3, prefix_len=4)
    b = synthetic_requests(5, LengthDist(20, 0.5), LengthDist(8), seed=3, prefix_len=4)
    assert [x.prompt for x in a] == [x.prompt for x in b]
    assert all(10 <= len(x.prompt.split()) <= 30 and x.max_tokens == 8 for x in a)
    assert len({x.prompt.split()[0:4].__repr__() for x in a}) == 1  # shared prefix
    assert synthetic_requests(2, LengthDist(5), LengthDist(3), api="chat")[0].messages[0]["role"] == "user"


def test_jsonl_dataset_rows_and_errors(tmp_path):
    from arbor.sandbox.serving.workload import DatasetError, dataset_requests

    p = tmp_path / "d.jsonl"
    p.write_text('{"prompt": "one two three", "max_tokens": 5}\n\n{"messages": [{"role": "user", "content": "hi"}]}\n')
    rows = dataset_requests(p, 5, default_max_tokens=7, api="chat")
    assert len(rows) == 5 and rows[0].messages[0]["content"] == "one two three" and rows[0].max_tokens == 5
    assert rows[1].messages == [{"role": "user", "content": "hi"}] and rows[1].max_tokens == 7
    assert rows[2].max_tokens == 5  # reused in order
    p.write_text('{"prompt": "ok"}\n{"text": 3}\n')
    with pytest.raises(DatasetError, match=r"d.jsonl:2: needs a 'prompt'"):
        dataset_requests(p, 2, 4)

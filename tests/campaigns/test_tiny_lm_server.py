"""The bundled CPU inference server speaks the OpenAI API the load generator and the accuracy
probe rely on: streaming with usage, logprobs, chat, metrics, and deterministic greedy output."""

import asyncio
import sys
from pathlib import Path

from arbor.sandbox.serving.client import build_body, complete_with_logprobs
from arbor.sandbox.serving.lifecycle import ServerConfig, start_servers, stop_all
from arbor.sandbox.serving.loadgen import Level, LoadConfig, make_client, run_level
from arbor.sandbox.serving.workload import LengthDist, RequestSpec, synthetic_requests

SERVER = Path(__file__).resolve().parents[2] / "campaigns" / "servers" / "tiny_lm_server.py"


def test_tiny_server_streams_batches_and_answers_greedily(tmp_path):
    argv = [sys.executable, str(SERVER), "--port", "{port}", "--max-batch-size", "4", "--layers", "2",
            "--dim", "64", "--vocab", "256", "--max-seq-len", "128"]
    registry = []
    try:
        (s,) = start_servers([ServerConfig(argv=argv, lease_dir=tmp_path, startup_timeout_s=120)], registry)

        async def go():
            async with make_client(8) as c:
                reqs = synthetic_requests(8, LengthDist(12, 0.5), LengthDist(6))
                lvl = await run_level(c, s.base_url, LoadConfig(model="tiny-lm", num_prompts=8, metrics_path="/metrics"),
                                      reqs, Level(concurrency=4))
                probe = RequestSpec(None, [{"role": "user", "content": "the first word"}], 5, 3)
                body = build_body(probe, "chat", "tiny-lm", stream=False, logprobs=1)
                a = await complete_with_logprobs(c, s.base_url, "chat", body, 30)
                b = await complete_with_logprobs(c, s.base_url, "chat", body, 30)
                bad = await c.post(s.base_url + "/v1/completions", json={"prompt": "x " * 200, "max_tokens": 8})
                return lvl, a, b, bad

        lvl, a, b, bad = asyncio.run(go())
    finally:
        stop_all(registry)
    assert lvl["completed"] == 8 and lvl["failed"] == 0 and lvl["usage_reported"]
    assert lvl["output_tokens"] == 8 * 6 and lvl["out_len_ratio"] == 1.0  # honours max_tokens + ignore_eos
    assert a.ok and len(a.tokens) == 5 and all(lp <= 0 for lp in a.logprobs)
    assert (a.tokens, a.logprobs) == (b.tokens, b.logprobs)  # greedy + fixed seed: deterministic
    assert bad.status_code == 400 and "context" in bad.json()["error"]["message"]

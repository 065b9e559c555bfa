"""Where the llama.cpp campaign's accuracy threshold comes from: greedy agreement of SmolLM2's
answers with the f16 baseline on the campaign's 32 written questions, for configurations that
must pass (f16 under other slots and batch sizes: llama.cpp's batched kernels are not bitwise
batch-invariant) and the output-changing knobs the campaign offers (KV-cache types, flash
attention). The threshold must sit below the first group and is what separates the second.

    python -m benchmarks.llamacpp_accuracy
"""

from __future__ import annotations

import asyncio
import time

from benchmarks.common import ROOT, machine, table, write_result

CONFIGS = {
    "f16, 8 slots": {"parallel": 8},
    "flash attention on": {"flash_attn": "on"},
    "K cache q8_0": {"cache_type_k": "q8_0"},
    "K cache q4_0": {"cache_type_k": "q4_0"},
    "K+V cache q4_0": {"cache_type_k": "q4_0", "cache_type_v": "q4_0", "flash_attn": "on"},
}


async def _answers(adapter, cfg: dict, label: str) -> list[dict]:
    from arbor.sandbox.serving.client import build_body, complete_with_logprobs
    from arbor.sandbox.serving.lifecycle import start_servers, stop_all
    from arbor.sandbox.serving.loadgen import make_client

    started: list = []
    try:
        (server,) = start_servers([adapter._server(cfg, label)], started)
        out = []
        async with make_client(1) as client:
            for spec in adapter._probe_requests():
                body = build_body(spec, adapter.t.api, adapter.t.model, stream=False, temperature=0.0,
                                  ignore_eos=True, logprobs=1)
                c = await complete_with_logprobs(client, server.base_url, adapter.t.api, body, 60)
                out.append(c.to_dict())
        return out
    finally:
        stop_all(started)


def main() -> int:
    from arbor.agents.critic.serving_gates import accuracy_report
    from arbor.spec import load_spec
    from arbor.targets import make_adapter

    started = time.monotonic()
    adapter = make_adapter(load_spec(ROOT / "campaigns" / "serving_llamacpp.yaml"))
    adapter.validate()
    base = adapter.t.defaults()
    reference = asyncio.run(_answers(adapter, base, "baseline"))
    rows = []
    for name, change in CONFIGS.items():
        cand = asyncio.run(_answers(adapter, {**base, **change}, "candidate"))
        rep = accuracy_report({"baseline": reference, "candidate": cand})
        rows.append({"config": name, "knobs": change, **(rep or {}),
                     "examples": [c["text"][:60] for c in cand[:3]]})
    a = adapter.t.accuracy
    for r in rows:
        r["passes"] = r.get("prefix_match", 0) >= a.min_prefix_match and r.get("logprob_diff", 9) <= a.max_logprob_diff
    print(table(rows, [("config", "config"), ("prefix_match", "greedy agreement"),
                       ("logprob_diff", "mean |Δ logprob|"), ("passes", "passes")]))
    print("baseline examples:", [c["text"][:60] for c in reference[:3]])
    path = write_result("llamacpp_accuracy", {"machine": machine(), "threshold": {
        "min_prefix_match": a.min_prefix_match, "max_logprob_diff": a.max_logprob_diff},
        "baseline_examples": [c["text"] for c in reference[:5]], "rows": rows}, started)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

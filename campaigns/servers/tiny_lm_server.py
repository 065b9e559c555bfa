#!/usr/bin/env python3
"""A tiny but real OpenAI-compatible inference server for CPU serving campaigns.

A small decoder-only transformer (random weights from a fixed seed, so every instance with the
same dtype produces the same greedy tokens) behind an asyncio HTTP/1.1 server speaking
``/v1/completions`` and ``/v1/chat/completions`` — streaming (SSE, with ``usage`` when
``stream_options.include_usage`` is set) and not, with ``logprobs`` — plus ``/health``,
``/v1/models`` and a Prometheus ``/metrics`` page (queue depth, running requests, KV usage).

The engine is what vLLM does, in miniature: continuous batching over a slot-based KV cache,
admission bounded by ``--max-batch-size`` and a KV-token budget, chunked prefill bounded by
``--max-prefill-tokens`` per step, then one batched decode step for every running sequence. So
the knobs trade off the way real serving knobs do: bigger batches buy throughput with per-token
latency, prefill budget trades TTFT against TPOT, more threads help only if cores are free,
bfloat16 changes the outputs. Standalone: the standard library and torch only; its parts
live in ``tiny_lm/`` beside this file (model, engine, HTTP front end).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its parts, also under ``python -I``
from tiny_lm.engine import Engine  # noqa: E402
from tiny_lm.http_api import Server  # noqa: E402
from tiny_lm.model import TinyLM, Tokenizer  # noqa: E402


def _bool(text: str) -> bool:
    v = str(text).strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off", ""):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--model-name", default="tiny-lm")
    p.add_argument("--max-batch-size", type=int, default=8, help="max running sequences (decode batch)")
    p.add_argument("--batch-wait-ms", type=float, default=0.0, help="when idle, wait this long to fill a batch")
    p.add_argument("--max-prefill-tokens", type=int, default=512, help="prompt tokens prefilled per engine step")
    p.add_argument("--kv-cache-tokens", type=int, default=16384, help="KV budget: admission control")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--compile", type=_bool, default=False, help="torch.compile the decode step")
    p.add_argument("--stream-interval", type=int, default=1, help="tokens per streamed event")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--max-seq-len", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    for name in ("max_batch_size", "max_prefill_tokens", "kv_cache_tokens", "threads", "stream_interval"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if a.dim % a.heads:
        p.error("--dim must be a multiple of --heads")
    return a


def warm_up(model: TinyLM, engine: Engine, a: argparse.Namespace) -> None:
    """Touch every code path once (and trigger torch.compile) before reporting healthy."""
    model.prefill(0, [1] * 16, 0)
    for b in sorted({1, min(2, a.max_batch_size), a.max_batch_size}):
        engine.decode(torch.ones(b, dtype=torch.long), torch.arange(1, b + 1, dtype=torch.long) % 16)


async def main_async(a: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    dtype = torch.bfloat16 if a.dtype == "bfloat16" else torch.float32
    model = TinyLM(a, dtype)
    engine = Engine(model, a, loop)
    warm_up(model, engine, a)
    threading.Thread(target=engine.run, name="engine", daemon=True).start()
    server = Server(a, engine, Tokenizer(a.vocab))
    srv = await asyncio.start_server(server.handle, a.host, a.port, backlog=1024)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"tiny-lm ready on http://{a.host}:{a.port} (batch {a.max_batch_size}, {a.threads} thread(s), "
          f"{a.dtype}, compile={a.compile})", flush=True)
    async with srv:
        await stop.wait()


def main(argv=None) -> None:
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    asyncio.run(main_async(a))


if __name__ == "__main__":
    main()

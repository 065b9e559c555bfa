#!/usr/bin/env python3
"""A scripted OpenAI-compatible streaming server with KNOWN timings, for tests (stdlib only).

Every completion waits ``--ttft-ms`` before its first event, then ``--itl-ms`` between events;
each event carries ``--tokens-per-event`` tokens; ``--slots`` requests are served at a time (the
rest queue, as in a server with that batch size). A prompt containing FAIL gets HTTP 500. The
``/metrics`` page reports fixed vLLM-named gauges. ``--spawn`` forks a child and a grandchild that
escapes the process group (setsid) and ignores SIGTERM, writing every PID to ``--pid-file`` — the
lifecycle tests check they all die.
"""

import argparse
import asyncio
import json
import os
import signal
import time


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ttft-ms", type=float, default=100)
    p.add_argument("--itl-ms", type=float, default=20)
    p.add_argument("--tokens-per-event", type=int, default=1)
    p.add_argument("--usage", default="true")
    p.add_argument("--slots", type=int, default=1000)
    p.add_argument("--startup-s", type=float, default=0.0)
    p.add_argument("--logprob-shift", type=float, default=0.0)
    p.add_argument("--diverge-at", type=int, default=-1)
    p.add_argument("--spawn", action="store_true")
    p.add_argument("--pid-file", default="")
    return p.parse_args()


A = parse()
SLOTS = None


def spawn_family():
    """child (same group) + grandchild (own session, ignores SIGTERM): both must still die."""
    pids = [os.getpid()]
    child = os.fork()
    if child == 0:
        grand = os.fork()
        if grand == 0:
            os.setsid()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:
                time.sleep(1)
        with open(A.pid_file + ".grand", "w") as f:
            f.write(str(grand))
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(1)
    pids.append(child)
    for _ in range(100):
        if os.path.exists(A.pid_file + ".grand"):
            break
        time.sleep(0.02)
    pids.append(int(open(A.pid_file + ".grand").read()))
    with open(A.pid_file, "w") as f:
        json.dump(pids, f)


async def send(writer, status, body, ctype="application/json"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(data)}\r\n\r\n".encode()
                 + data)
    await writer.drain()


def token(i: int) -> str:
    return f" t{i}"


async def complete(req, chat, writer):
    n = int(req.get("max_tokens") or 4)
    text = json.dumps(req.get("messages") if chat else req.get("prompt"))
    if "FAIL" in text:
        return await send(writer, 500, {"error": {"message": "scripted failure"}})
    async with SLOTS:
        if not req.get("stream"):
            toks = [token(i) if i != A.diverge_at else " other" for i in range(n)]
            lps = [-0.5 - 0.01 * i + A.logprob_shift for i in range(n)]
            lp = {"content": [{"token": t, "logprob": v} for t, v in zip(toks, lps)]} if chat else \
                {"tokens": toks, "token_logprobs": lps}
            c = {"index": 0, "logprobs": lp, "finish_reason": "length"}
            c.update({"message": {"role": "assistant", "content": "".join(toks)}} if chat else {"text": "".join(toks)})
            return await send(writer, 200, {"choices": [c], "usage": {"prompt_tokens": 3, "completion_tokens": n}})
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")

        async def event(obj):
            data = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()

        if chat:  # a role-only first event carries no text and must not count as a token
            await event({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
        await asyncio.sleep(A.ttft_ms / 1e3)
        sent = 0
        while sent < n:
            k = min(A.tokens_per_event, n - sent)
            piece = "".join(token(sent + j) for j in range(k))
            sent += k
            choice = {"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece}
            await event({"choices": [choice]})
            if sent < n:
                await asyncio.sleep(A.itl_ms / 1e3)
        if A.usage == "true":
            await event({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": n}})
        await event(b"[DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()


METRICS = (b'vllm:num_requests_waiting{model_name="m"} 3\nvllm:num_requests_running{model_name="m"} 2\n'
           b'vllm:kv_cache_usage_perc{model_name="m"} 0.5\nvllm:num_preemptions_total{model_name="m"} 0\n')


async def handle(reader, writer):
    try:
        while True:
            line = await reader.readline()
            if not line:
                break
            method, path = line.decode().split()[:2]
            headers = {}
            while (h := await reader.readline()) not in (b"\r\n", b""):
                k, _, v = h.decode().partition(":")
                headers[k.strip().lower()] = v.strip()
            body = await reader.readexactly(int(headers.get("content-length") or 0))
            if path == "/health":
                await send(writer, 200, b"ok", "text/plain")
            elif path == "/metrics":
                await send(writer, 200, METRICS, "text/plain")
            elif path in ("/v1/completions", "/v1/chat/completions"):
                await complete(json.loads(body), path.endswith("chat/completions"), writer)
            else:
                await send(writer, 404, {"error": "no route"})
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def main():
    global SLOTS
    SLOTS = asyncio.Semaphore(A.slots)
    if A.spawn:
        spawn_family()
    time.sleep(A.startup_s)
    srv = await asyncio.start_server(handle, A.host, A.port)
    print("scripted server ready", flush=True)
    async with srv:
        await srv.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())

"""The OpenAI-compatible HTTP/1.1 front end: completions and chat, streaming (SSE, with usage)
and whole, logprobs, ``/health``, ``/v1/models`` and a Prometheus ``/metrics`` page."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid

from .engine import Engine, Seq
from .model import Tokenizer


class HttpError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error"}


class Server:
    def __init__(self, a: argparse.Namespace, engine: Engine, tok: Tokenizer):
        self.a, self.engine, self.tok = a, engine, tok

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                parts = line.decode("latin-1").split()
                if len(parts) < 2:
                    break
                method, path = parts[0], parts[1].split("?", 1)[0]
                headers = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length") or 0))
                try:
                    await self.route(method, path, body, writer)
                except HttpError as e:
                    await self.send_json(writer, e.status, {"error": {"message": str(e), "type": "invalid_request_error"}})
                if headers.get("connection", "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def send(self, writer, status: int, ctype: str, data: bytes) -> None:
        writer.write(f"HTTP/1.1 {status} {REASONS.get(status, 'OK')}\r\nContent-Type: {ctype}\r\n"
                     f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        await writer.drain()

    async def send_json(self, writer, status: int, obj) -> None:
        await self.send(writer, status, "application/json", json.dumps(obj).encode())

    async def route(self, method: str, path: str, body: bytes, writer) -> None:
        if path == "/health":
            return await self.send(writer, 200, "text/plain", b"ok")
        if path == "/v1/models":
            return await self.send_json(writer, 200, {"object": "list", "data": [
                {"id": self.a.model_name, "object": "model", "owned_by": "arbor"}]})
        if path == "/metrics":
            return await self.send(writer, 200, "text/plain; version=0.0.4", self.metrics().encode())
        if path in ("/v1/completions", "/v1/chat/completions"):
            if method != "POST":
                raise HttpError(405, "use POST")
            try:
                req = json.loads(body or b"{}")
            except ValueError:
                raise HttpError(400, "body is not valid JSON") from None
            if not isinstance(req, dict):
                raise HttpError(400, "body must be a JSON object")
            return await self.generate(req, path.endswith("chat/completions"), writer)
        raise HttpError(404, f"no route {path}")

    def metrics(self) -> str:
        e, lab = self.engine, f'{{model_name="{self.a.model_name}"}}'
        rows = [("num_requests_running", "gauge", len(e.running)),
                ("num_requests_waiting", "gauge", len(e.waiting)),
                ("kv_cache_usage_perc", "gauge", e.reserved / self.a.kv_cache_tokens),
                ("num_preemptions_total", "counter", 0),
                ("prompt_tokens_total", "counter", e.counters["prompt_tokens"]),
                ("generation_tokens_total", "counter", e.counters["generation_tokens"]),
                ("request_success_total", "counter", e.counters["requests"])]
        return "".join(f"# TYPE tiny:{n} {t}\ntiny:{n}{lab} {v}\n" for n, t, v in rows)

    def _prompt_ids(self, req: dict, chat: bool) -> list[int]:
        if chat:
            msgs = req.get("messages")
            if not isinstance(msgs, list) or not msgs:
                raise HttpError(400, "messages must be a non-empty list")
            text = " ".join(f"{m.get('role', 'user')}: {m.get('content', '')}" for m in msgs if isinstance(m, dict))
            return self.tok.encode(text)
        prompt = req.get("prompt")
        if isinstance(prompt, str):
            return self.tok.encode(prompt)
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            if not all(0 <= t < self.a.vocab for t in prompt):
                raise HttpError(400, f"token ids must be in [0, {self.a.vocab})")
            return list(prompt)
        raise HttpError(400, "prompt must be a string or a list of token ids")

    async def generate(self, req: dict, chat: bool, writer) -> None:
        ids = self._prompt_ids(req, chat)
        try:
            max_tokens = int(req.get("max_completion_tokens") or req.get("max_tokens") or 16)
            temperature = float(req.get("temperature", 1.0))
        except (TypeError, ValueError):
            raise HttpError(400, "max_tokens and temperature must be numbers") from None
        if max_tokens < 1:
            raise HttpError(400, "max_tokens must be >= 1")
        if len(ids) + max_tokens > self.a.max_seq_len:
            raise HttpError(400, f"prompt ({len(ids)} tokens) + max_tokens ({max_tokens}) exceeds the "
                                 f"context of {self.a.max_seq_len} tokens")
        if len(ids) + max_tokens > self.a.kv_cache_tokens:
            raise HttpError(400, "request does not fit in the KV cache")
        lp = req.get("logprobs")
        logprobs = (int(req.get("top_logprobs") or 1) if lp else None) if chat else (int(lp) if lp else None)
        queue: asyncio.Queue = asyncio.Queue()
        seq = Seq(ids, max_tokens, bool(req.get("ignore_eos", False)), temperature, logprobs,
                  int(req.get("seed") or 0), queue.put_nowait)
        self.engine.submit(seq)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:16]
        try:
            if req.get("stream"):
                usage = bool((req.get("stream_options") or {}).get("include_usage"))
                await self.stream(seq, queue, chat, rid, usage, writer)
            else:
                await self.whole(seq, queue, chat, rid, writer)
        except (ConnectionError, asyncio.CancelledError):
            seq.cancelled = True
            raise

    def _usage(self, seq: Seq) -> dict:
        return {"prompt_tokens": len(seq.ids), "completion_tokens": len(seq.gen),
                "total_tokens": len(seq.ids) + len(seq.gen)}

    def _logprobs(self, items, chat: bool):
        if chat:
            return {"content": [{"token": self.tok.piece(t), "logprob": lp,
                                 "top_logprobs": [{"token": self.tok.piece(i), "logprob": v} for i, v in top]}
                                for t, lp, top in items]}
        return {"tokens": [self.tok.piece(t) for t, _, _ in items], "token_logprobs": [lp for _, lp, _ in items],
                "top_logprobs": [{self.tok.piece(i): v for i, v in top} for _, _, top in items]}

    def _choice(self, items, chat: bool, finish, with_lp: bool, delta: bool) -> dict:
        text = "".join(self.tok.piece(t) for t, _, _ in items)
        c: dict = {"index": 0, "finish_reason": finish, "logprobs": self._logprobs(items, chat) if with_lp else None}
        if chat:
            c["delta" if delta else "message"] = {"role": "assistant", "content": text}
        else:
            c["text"] = text
        return c

    async def stream(self, seq: Seq, queue: asyncio.Queue, chat: bool, rid: str, usage: bool, writer) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        obj = "chat.completion.chunk" if chat else "text_completion"
        created = int(time.time())
        with_lp = seq.logprobs is not None

        async def event(payload) -> None:
            data = b"data: " + (payload if isinstance(payload, bytes) else json.dumps(payload).encode()) + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()

        def chunk(choices, extra=None) -> dict:
            d = {"id": rid, "object": obj, "created": created, "model": self.a.model_name, "choices": choices}
            d.update(extra or {})
            return d

        pending = []
        while True:
            tok, lp, top = await queue.get()
            if tok is not None:
                pending.append((tok, lp, top))
            if pending and (tok is None or len(pending) >= self.a.stream_interval):
                await event(chunk([self._choice(pending, chat, None, with_lp, True)]))
                pending = []
            if tok is None:
                break
        if seq.finish_reason == "error":
            await event({"error": {"message": "engine error", "type": "server_error"}})
        else:
            fin = self._choice([], chat, seq.finish_reason, False, True)
            if chat:
                fin["delta"] = {}
            await event(chunk([fin]))
            if usage:
                await event(chunk([], {"usage": self._usage(seq)}))
        await event(b"[DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def whole(self, seq: Seq, queue: asyncio.Queue, chat: bool, rid: str, writer) -> None:
        items = []
        while True:
            tok, lp, top = await queue.get()
            if tok is None:
                break
            items.append((tok, lp, top))
        if seq.finish_reason == "error":
            raise HttpError(500, "engine error")
        choice = self._choice(items, chat, seq.finish_reason, seq.logprobs is not None, False)
        await self.send_json(writer, 200, {
            "id": rid, "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
            "model": self.a.model_name, "choices": [choice], "usage": self._usage(seq)})
